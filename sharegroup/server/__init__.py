"""`sharegroup serve`: a Kafka-protocol broker around the share-group engine (layer 4: an edge).

`api` is the leaf every handler and the connection import (RequestContext, the exceptions that cross the
server, the BrokerView protocol); then `connection`, `broker`, `handlers/` (one module per Kafka API
family), `security/` (listeners, TLS, SASL, ACLs) and the services it wires (`share_services`). The
durable topic store it serves is `sharegroup.topics` (layer 2).
"""

__all__: list[str] = []  # entered through `sharegroup serve` (serve.main); embedders use the layers below
