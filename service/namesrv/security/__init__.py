"""Who may do what: RocketMQ ACL signatures, address allow-lists, and keeping secrets in.

``Authorizer`` (policy.py) is built once at start-up from the settings and consulted by both
transports; ``redact`` keeps passwords out of every view of the configuration and of the logs.
"""
