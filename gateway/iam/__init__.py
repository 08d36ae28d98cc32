"""IAM and STS: an account's users, groups, roles, policies and access keys (account.py),
stored in the catalog; their query APIs on the gateway's endpoint (api.py); and who an access
key or temporary credential is, for authentication and authorisation (principals.py)."""
