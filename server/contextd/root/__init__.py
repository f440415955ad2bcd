"""The composition root: the parts of a server built from its settings (wiring.py),
every listener started from one place (listeners.py), and the server's lifecycle
(server.py); with the TLS and log set-up they share."""
