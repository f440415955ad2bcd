"""The front doors: one sub-package per protocol, each turning its protocol into calls
on the app (``grpc``, the native API, does so directly; the others translate to native
calls, so auth, tenants, limits and the audit log apply alike on every port)."""
