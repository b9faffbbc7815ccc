"""`sharegroup serve`: a Kafka-protocol broker (layer 4, an edge) over the durable topic store and the engine."""
