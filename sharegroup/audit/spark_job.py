"""The audit as a PySpark job, and the Spark session tuned for small machines.

Plan (three Spark jobs; the third does the work):

1. list the state-log directory with the `binaryFile` source, selecting only path and length (Spark
   does not read the contents), and read the small `log-start-offset` file if there is one;
2. the driver picks the live segments and the log start offset exactly as recovery does (decode.py);
3. `binaryFile` reads the live segment files (one row per file: path + bytes) → `mapPartitions`
   walks whole files in bulk, checking every frame's framing and CRC and routing its raw bytes by
   share-partition key into chunks → `groupByKey` with a stable hash of the key → each key's frames are
   decoded, sorted by log offset and replayed by the shared KeyAuditor → `collect` brings back one
   small KeyResult per key and one SegmentScan per file.

Everything an executor needs travels through Spark: files through `binaryFile`, the audit's code as a
zip added with `addPyFile` (so executors run the driver's code, also on a cluster where the package is
not installed; they still need pyspark, msgpack, crc32c and prometheus-client). Nothing on the driver's
local file system is read by an executor, so the same job runs with `--master spark://...` given a
directory every executor can read (HDFS, S3, NFS mounted at the same path, ...).

pyspark is imported inside functions only, so importing this module costs nothing.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

from .decode import START_OFFSET_FILE, display_path, judge_segments, parse_segment_name, plan_log
from .result import AuditEnvironmentError, AuditResult, assemble
from .rules import AuditOptions
from .tasks import audit_group, partition_of, split_partition

__all__ = [
    "JAVA_INSTALL_HINT",
    "check_java",
    "local_session_config",
    "build_session",
    "run_spark_audit",
    "spark_path",
]

JAVA_INSTALL_HINT = "install Java 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
JAVA_MAJOR_MIN = 17  # PySpark 4 runs on Java 17 or 21
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SHIPPED_ATTR = "_sharegroup_audit_code_shipped"


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def check_java() -> str:
    """The java executable PySpark will launch (JAVA_HOME/bin/java, else `java` on PATH), checked to be
    Java 17 or newer; AuditEnvironmentError saying what to install otherwise."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "`java` is not on PATH"
        raise AuditEnvironmentError(
            f"the Spark audit needs Java {JAVA_MAJOR_MIN}+, but {where}: {JAVA_INSTALL_HINT}; "
            "or run the audit without Spark (--engine python)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise AuditEnvironmentError(f"cannot run {java} -version ({exc}): {JAVA_INSTALL_HINT}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match:
        major = int(match.group(1))
        if major == 1 and match.group(2):  # "1.8.0_292" is Java 8
            major = int(match.group(2))
        if major < JAVA_MAJOR_MIN:
            raise AuditEnvironmentError(
                f"PySpark 4 needs Java {JAVA_MAJOR_MIN} or newer, {java} is Java {major}: {JAVA_INSTALL_HINT}"
            )
    return java


def local_session_config() -> dict[str, str]:
    """The small-machine configuration for `local[...]` masters (2 cores, 512m driver, no UI)."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "512m",  # the floor: 256m is refused
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.execution.pythonUDF.arrow.enabled": "false",  # no Arrow UDFs here (no pandas needed)
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",  # ~5 s faster JVM start
    }


def _cluster_session_config() -> dict[str, str]:
    """For a cluster: no loopback addresses, parallelism left to the cluster."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.pythonUDF.arrow.enabled": "false",
    }


def build_session(master: str = "local[2]", conf: dict[str, str] | None = None, app_name: str = "sharegroup-audit"):
    """Start (or join) a SparkSession for the audit. For local masters the Python workers run this
    interpreter (PYSPARK_PYTHON) and the driver binds to 127.0.0.1; a cluster keeps its own settings.
    `conf` entries override the defaults. Raises AuditEnvironmentError when Java or pyspark is missing."""
    check_java()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise AuditEnvironmentError(
            "the Spark audit needs PySpark: pip install 'pyspark>=4.0' (or run with --engine python)"
        ) from None
    local = is_local_master(master)
    if local:
        # Workers must run this interpreter (the venv), not `python3` from PATH; both variables must be
        # set before the JVM starts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = local_session_config() if local else _cluster_session_config()
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_path(log_dir: str) -> str:
    """The directory as Spark should read it: URIs (hdfs://, s3a://, file:) as given, local paths made
    absolute (a cluster resolves them against its default file system)."""
    return log_dir if _URI_SCHEME.match(log_dir) else os.path.abspath(log_dir)


def _code_zip() -> str:
    """A zip of the `sharegroup` and `persister` Python sources (what executors import), built once per
    process in a temporary directory removed at exit."""
    import persister
    import sharegroup

    tmp = tempfile.mkdtemp(prefix="sharegroup-audit-")
    atexit.register(shutil.rmtree, tmp, True)
    path = os.path.join(tmp, "sharegroup_audit_code.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in (sharegroup, persister):
            root = os.path.dirname(os.path.abspath(package.__file__))
            parent = os.path.dirname(root)
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                for name in filenames:
                    if name.endswith(".py"):
                        full = os.path.join(dirpath, name)
                        zf.write(full, os.path.relpath(full, parent))
    return path


@functools.lru_cache(maxsize=1)
def _cached_code_zip() -> str:
    return _code_zip()


def ship_code(sc) -> None:
    """Make the audit's code importable on the executors of `sc` (once per SparkContext)."""
    if getattr(sc, _SHIPPED_ATTR, False):
        return
    sc.addPyFile(_cached_code_zip())
    setattr(sc, _SHIPPED_ATTR, True)


def _list(spark, path: str) -> tuple[list[tuple[int, str]], bytes | None, str | None]:
    """Segment files [(base, uri)] of the directory, the start offset file's content and its uri."""
    from pyspark.errors import AnalysisException

    try:
        listing = spark.read.format("binaryFile").load(path).select("path", "length").collect()
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise AuditEnvironmentError(f"no such state log directory: {path}") from None
        raise
    listed = []
    start_uri = None
    for row in listing:
        name = row.path.rstrip("/").rsplit("/", 1)[-1]
        base = parse_segment_name(name)
        if base is not None:
            listed.append((base, row.path))
        elif name == START_OFFSET_FILE:
            start_uri = row.path
    listed.sort()
    start_content = None
    if start_uri is not None:
        (row,) = spark.read.format("binaryFile").load(start_uri).select("content").collect()
        start_content = bytes(row.content)
    return listed, start_content, start_uri


def _worker_import_hint(exc: BaseException) -> AuditEnvironmentError | None:
    text = str(exc)
    if "ModuleNotFoundError" in text or "No module named" in text:
        missing = re.search(r"No module named '([^']+)'", text)
        what = f" ({missing.group(1)})" if missing else ""
        return AuditEnvironmentError(
            f"Spark's Python workers cannot import the audit's dependencies{what}: install msgpack, crc32c "
            "and prometheus-client (or the sharegroup package) on every worker, and point PYSPARK_PYTHON at "
            "that interpreter"
        )
    return None


def run_spark_audit(spark, log_dir: str, options: AuditOptions | None = None) -> AuditResult:
    """Audit the state log in `log_dir` with `spark` (the session is neither configured nor stopped)."""
    options = AuditOptions() if options is None else options
    started = time.perf_counter()
    sc = spark.sparkContext
    path = spark_path(os.fspath(log_dir))
    ship_code(sc)
    listed, start_content, start_uri = _list(spark, path)
    if not listed:
        raise AuditEnvironmentError(f"no state log segments (*.log) in {path}: is it a state log directory?")
    plan = plan_log(listed, start_content)
    files = spark.read.format("binaryFile").load([uri for _base, uri in plan.live]).select("path", "content")
    partitions = max(1, sc.defaultParallelism)
    try:
        collected = (
            files.rdd.mapPartitions(functools.partial(split_partition, log_start_offset=plan.log_start_offset))
            .groupByKey(partitions, partition_of)
            .map(functools.partial(audit_group, options=options, log_start_offset=plan.log_start_offset))
            .collect()
        )
    except Exception as exc:
        hint = _worker_import_hint(exc)
        if hint is not None:
            raise hint from exc
        raise
    scans = {}
    key_results = []
    for kind, payload in collected:
        if kind == "key":
            key_results.append(payload)
        else:
            for scan in payload:
                scans[scan.path] = scan
    live = [(base, display_path(uri)) for base, uri in plan.live]
    missing = [path for _base, path in live if path not in scans]
    if missing:  # a segment deleted between listing and reading: the log was being pruned meanwhile
        raise AuditEnvironmentError(f"segment files vanished while auditing (is the log in use?): {missing[:3]}")
    judgement = judge_segments(
        live, scans, plan.log_start_offset, plan.start_offset_error, start_uri and display_path(start_uri)
    )
    result = assemble(
        log_dir=display_path(os.fspath(log_dir)),  # as the user gave it: reports never show another path
        engine="spark",
        master=sc.master,
        options=options,
        judgement=judgement,
        scans=list(scans.values()),
        key_results=key_results,
    )
    result.elapsed_seconds = time.perf_counter() - started
    return result
