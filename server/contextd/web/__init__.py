"""gRPC-Web over HTTP/1.1: a gateway in front of the native gRPC port, for browsers and
.NET Framework hosts that cannot speak HTTP/2 gRPC."""
