"""Security of `sharegroup serve`: who a connection is (listeners, TLS, SASL) and what it may do (ACLs)."""
