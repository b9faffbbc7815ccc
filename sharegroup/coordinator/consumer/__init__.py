"""KIP-848 consumer groups: ConsumerGroupHeartbeat, the uniform and range assignors, reconciliation and describe."""
