"""Security of `sharegroup serve`: who a connection is (listeners, TLS, SASL) and what it may do (ACLs).

- `listeners`: Kafka's `listeners` / `listener.security.protocol.map` / `advertised.listeners` and the
  per-listener (`listener.name.<name>.`) config lookup;
- `tls`: the `ssl.SSLContext` of an SSL / SASL_SSL listener from Kafka's PEM configs;
- `ssl_principal`: the principal of a TLS client certificate (RFC 2253 subject, `ssl.principal.mapping.rules`);
- `scram_credentials`: the durable SCRAM credential store under `DIR/security`;
- `sasl_mechanisms` and `sasl`: PLAIN and SCRAM servers, and Kafka's SaslHandshake / SaslAuthenticate
  state machine that gates a SASL connection until it has authenticated;
- `acls`, `acl_store` and `authorizer`: ACL bindings and filters, their durable file, and the
  authorizer with Kafka's StandardAuthorizer semantics;
- `broker_security`: everything above, built once from the broker config.
"""

__all__: list[str] = []  # built from the broker config by `broker_security`; handlers import its modules
