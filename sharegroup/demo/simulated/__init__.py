"""The in-process simulated demo (`sharegroup demo --simulated`): simulated share consumers talk to a
`SharePartitionManager` as to a broker, on simulated time, so a seed always gives the same run.

`demo` is the entry point (`run_demo`); `run` the simulated cluster and its tasks (`DemoRun`),
`manager` the manager on simulated time, `consumer` a share consumer, `workload` what the clients
decide from the seed, `ledger` the demo's own account of every record, `summary` what is counted and
printed, `simulation` the simulated time itself (`VirtualTime`).
"""

__all__: list[str] = []  # entered through `sharegroup.demo.run_demo`
