"""The live demo (`sharegroup demo`, the default): real Kafka clients against `sharegroup serve`.

`demo` is the entry point (`run_live_demo`: serve as a subprocess, the producer, the run's loop);
`consumer` a `confluent_kafka.ShareConsumer` in a child process, `workload` what is produced and how
it is acknowledged, `ledger` the account of every record from the clients' reports, `summary` what is
counted and printed, `share_state` the copy of a Kafka state topic (`--share-state`).
"""

__all__: list[str] = []  # entered through `sharegroup.demo.run_live_demo`
