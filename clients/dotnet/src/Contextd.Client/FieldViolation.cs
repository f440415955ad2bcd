using System;
using System.Collections.Generic;
using System.Linq;
using Google.Protobuf;
using Google.Rpc;
using Grpc.Core;

namespace Contextd.Client
{
    /// <summary>A request field the server rejected, and why.</summary>
    public sealed class FieldViolation
    {
        internal FieldViolation(string field, string description)
        {
            Field = field;
            Description = description;
        }

        /// <summary>The field's path in the request, for example <c>history[3].tool_calls[0].name</c>.</summary>
        public string Field { get; }

        /// <summary>What is wrong with it.</summary>
        public string Description { get; }

        /// <inheritdoc />
        public override string ToString() => Field + ": " + Description;
    }
}
