using System.Collections.Generic;
using Contextd.V1;

namespace Contextd.Client
{
    /// <summary>
    /// What <see cref="ContextdChatClient"/> puts into every turn besides the messages and
    /// the <see cref="Microsoft.Extensions.AI.ChatOptions"/>: whose turn it is and how contextd
    /// builds its context.
    /// </summary>
    public sealed class ContextdChatClientOptions
    {
        /// <summary>
        /// The user the turns belong to. Required by a server started with <c>--auth none</c>;
        /// with an API key or a token leave it empty: the credential's user is meant.
        /// </summary>
        public string UserId { get; set; } = "";

        /// <summary>The scenario of new sessions (its prompt template and skills); empty for the server's choice.</summary>
        public string Scenario { get; set; } = "";

        /// <summary>The host of new sessions, for example <c>excel</c>; empty for none.</summary>
        public string Host { get; set; } = "";

        /// <summary>Values for the <c>{{variables}}</c> of the scenario's template and skills.</summary>
        public IDictionary<string, string> Variables { get; } = new Dictionary<string, string>();

        /// <summary>Title of the sessions this client starts.</summary>
        public string Title { get; set; } = "";

        /// <summary>
        /// How the host runs the session, written to its event log (<c>session_start</c>'s
        /// <c>meta.mode</c>); empty for contextd's default.
        /// </summary>
        public string Mode { get; set; } = "";

        /// <summary>Token budget of each prompt; 0 for the server's <c>max_prompt_tokens</c>.</summary>
        public int TokenBudget { get; set; }

        /// <summary>Tokenizer for the budget; empty for the server's default.</summary>
        public string Tokenizer { get; set; } = "";

        /// <summary>
        /// How the model is offered tools: the provider's own tool calling (the default) or
        /// contextd's ReAct tags, for models without it.
        /// </summary>
        public ToolProtocol ToolProtocol { get; set; } = ToolProtocol.Unspecified;
    }
}
