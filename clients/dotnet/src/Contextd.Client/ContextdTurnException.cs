using System;
using Contextd.V1;

namespace Contextd.Client
{
    /// <summary>
    /// A chat turn that started but ended without an answer (<see cref="TurnStatus.Error"/>: the
    /// model provider failed; or <see cref="TurnStatus.Cancelled"/> by the server), thrown by
    /// <see cref="ContextdChatClient"/>. What the turn produced before it ended is stored in the
    /// session, as for every turn.
    /// </summary>
    public sealed class ContextdTurnException : Exception
    {
        internal ContextdTurnException(string sessionId, TurnCompleted turn)
            : base(Describe(turn))
        {
            SessionId = sessionId;
            Turn = turn;
        }

        /// <summary>The session of the turn (the <c>ConversationId</c>).</summary>
        public string SessionId { get; }

        /// <summary>The turn's last event: its status, <c>ErrorMessage</c> and usage.</summary>
        public TurnCompleted Turn { get; }

        /// <summary>How the turn ended.</summary>
        public TurnStatus Status => Turn.Status;

        private static string Describe(TurnCompleted turn) => turn.Status switch
        {
            TurnStatus.Error => "the model provider failed: " + turn.ErrorMessage,
            TurnStatus.Cancelled => "the server cancelled the turn",
            _ => "the turn ended with status " + turn.Status,
        };
    }
}
