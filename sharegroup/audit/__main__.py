"""`python -m sharegroup.audit STATE_LOG_DIR ...` runs the audit on its own (same as `sharegroup audit`)."""

import sys

from .cli import main

sys.exit(main())
