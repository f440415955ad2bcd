"""The web port: gRPC-Web and Connect over HTTP/1.1, in front of the native gRPC port,
for browsers and .NET Framework hosts that cannot speak HTTP/2 gRPC."""
