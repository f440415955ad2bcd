using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    /// <summary>How a test reaches the server: gRPC over HTTP/2, or the web port over HTTP/1.1.</summary>
    public enum Transport
    {
        Grpc,
        GrpcWebText,
        GrpcWeb,
    }
}
