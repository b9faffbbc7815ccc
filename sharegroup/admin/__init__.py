"""The operator's command-line tools over the Kafka wire protocol (an edge, layer 4): `share-groups`
(kafka-share-groups.sh) and `configs` (kafka-configs.sh), both usable against any broker."""

__all__: list[str] = []  # entered through `sharegroup.cli`; the tools are its modules
