using System.Collections.Generic;

namespace Contextd.Client
{
    /// <summary>One page of a paginated list, as the server answered it.</summary>
    /// <typeparam name="T">The listed item (a session, a message, a memory, a change).</typeparam>
    public sealed class ContextdPage<T>
    {
        internal ContextdPage(IReadOnlyList<T> values, string continuationToken)
        {
            Values = values;
            ContinuationToken = continuationToken;
        }

        /// <summary>The items of this page, in the list's order.</summary>
        public IReadOnlyList<T> Values { get; }

        /// <summary>
        /// The token of the next page (the response's <c>next_page_token</c>); empty on the last
        /// page. Pass it to <see cref="ContextdPageable{T}.AsPages"/> to go on later.
        /// </summary>
        public string ContinuationToken { get; }
    }
}
