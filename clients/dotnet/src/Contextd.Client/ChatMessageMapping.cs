using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Text.Json;
using Contextd.V1;
using Google.Protobuf;
using Microsoft.Extensions.AI;

namespace Contextd.Client
{
    /// <summary>
    /// Microsoft.Extensions.AI messages to contextd's <see cref="Message"/> and back, for
    /// <see cref="ContextdChatClient"/> and <see cref="ContextdChatReducer"/>.
    /// </summary>
    internal static class ChatMessageMapping
    {
        /// <summary>
        /// One Microsoft.Extensions.AI message as contextd history: a tool message becomes one
        /// contextd message per function result it carries, any other message one message.
        /// </summary>
        internal static IEnumerable<Message> ToHistory(ChatMessage message, string where)
        {
            if (message.Role == ChatRole.Tool)
            {
                var results = message.Contents.OfType<FunctionResultContent>().ToList();
                if (results.Count == 0 || results.Count != message.Contents.Count)
                {
                    throw new ArgumentException(where + ": a tool message carries function results (FunctionResultContent) only");
                }
                foreach (var result in results)
                {
                    yield return new Message
                    {
                        Role = Role.Tool,
                        ToolCallId = result.CallId,
                        Content = ResultText(result),
                    };
                }
                yield break;
            }
            if (message.Role == ChatRole.User)
            {
                yield return UserMessage(message, where);
                yield break;
            }
            if (message.Role == ChatRole.Assistant)
            {
                yield return AssistantMessage(message, where);
                yield break;
            }
            if (message.Role == ChatRole.System)
            {
                yield return new Message { Role = Role.System, Content = TextOnly(message, where) };
                yield break;
            }
            throw new ArgumentException(where + ": contextd has no role '" + message.Role.Value + "' (system, user, assistant or tool)");
        }

        /// <summary>A user message: its text, or its parts when it has images.</summary>
        internal static Message UserMessage(ChatMessage message, string where)
        {
            var parts = UserParts(message, where);
            var result = new Message { Role = Role.User };
            if (parts.All(p => p.PartCase == ContentPart.PartOneofCase.Text))
            {
                result.Content = string.Concat(parts.Select(p => p.Text));
            }
            else
            {
                result.Parts.AddRange(parts);
            }
            return result;
        }

        /// <summary>
        /// A user message's contents as contextd parts: text, and images as bytes
        /// (<see cref="DataContent"/>) or by URL (<see cref="UriContent"/>).
        /// </summary>
        internal static List<ContentPart> UserParts(ChatMessage message, string where)
        {
            var parts = new List<ContentPart>();
            for (var i = 0; i < message.Contents.Count; i++)
            {
                switch (message.Contents[i])
                {
                    case TextContent text:
                        parts.Add(new ContentPart { Text = text.Text ?? "" });
                        break;
                    case DataContent data when data.HasTopLevelMediaType("image"):
                        parts.Add(new ContentPart
                        {
                            Image = new ImagePart { Data = ByteString.CopyFrom(data.Data.ToArray()), MediaType = data.MediaType },
                        });
                        break;
                    case UriContent uri when uri.HasTopLevelMediaType("image"):
                        parts.Add(new ContentPart { Image = new ImagePart { Url = uri.Uri.ToString() } });
                        break;
                    case var other:
                        throw new ArgumentException(
                            where + ".Contents[" + i + "]: a user message carries text and images only, not " + other.GetType().Name);
                }
            }
            return parts;
        }

        private static Message AssistantMessage(ChatMessage message, string where)
        {
            var result = new Message { Role = Role.Assistant };
            var text = new StringBuilder();
            for (var i = 0; i < message.Contents.Count; i++)
            {
                switch (message.Contents[i])
                {
                    case TextContent t:
                        text.Append(t.Text);
                        break;
                    // A call the server ran itself (memory_search) is in the stored session,
                    // not part of what the model asked the host for.
                    case FunctionCallContent call when call.InformationalOnly:
                        break;
                    case FunctionCallContent call:
                        result.ToolCalls.Add(new ToolCall { Id = call.CallId, Name = call.Name, Arguments = ArgumentsJson(call) });
                        break;
                    // What a model says beyond its answer (reasoning, usage) is not history.
                    case TextReasoningContent:
                    case UsageContent:
                        break;
                    case var other:
                        throw new ArgumentException(
                            where + ".Contents[" + i + "]: an assistant message carries text and function calls only, not " + other.GetType().Name);
                }
            }
            result.Content = text.ToString();
            return result;
        }

        private static string TextOnly(ChatMessage message, string where)
        {
            var text = new StringBuilder();
            for (var i = 0; i < message.Contents.Count; i++)
            {
                if (message.Contents[i] is not TextContent t)
                {
                    throw new ArgumentException(
                        where + ".Contents[" + i + "]: a system message carries text only, not " + message.Contents[i].GetType().Name);
                }
                text.Append(t.Text);
            }
            return text.ToString();
        }

        /// <summary>A function's result as the text contextd stores: a string as it is, anything else as JSON.</summary>
        internal static string ResultText(FunctionResultContent result) => result.Result switch
        {
            null => "",
            string s => s,
            // AIFunctionFactory's functions return their value as JSON: a string goes as its text.
            JsonElement { ValueKind: JsonValueKind.String } e => e.GetString() ?? "",
            var value => JsonSerializer.Serialize(value, AIJsonUtilities.DefaultOptions.GetTypeInfo(typeof(object))),
        };

        private static string ArgumentsJson(FunctionCallContent call) =>
            call.Arguments == null
                ? "{}"
                : JsonSerializer.Serialize(call.Arguments, AIJsonUtilities.DefaultOptions.GetTypeInfo(typeof(IDictionary<string, object?>)));

        /// <summary>contextd's JSON arguments (an object; empty means {}) as a function call's arguments.</summary>
        internal static FunctionCallContent ToFunctionCall(ToolCall call)
        {
            var arguments = new Dictionary<string, object?>();
            if (!string.IsNullOrWhiteSpace(call.Arguments))
            {
                using var document = JsonDocument.Parse(call.Arguments);
                if (document.RootElement.ValueKind != JsonValueKind.Object)
                {
                    throw ContextdException.Protocol("tool call " + call.Id + " has arguments that are not a JSON object");
                }
                foreach (var property in document.RootElement.EnumerateObject())
                {
                    arguments[property.Name] = property.Value.Clone();
                }
            }
            return new FunctionCallContent(call.Id, call.Name, arguments) { RawRepresentation = call };
        }

        /// <summary>A message of a BuildMessages answer as a Microsoft.Extensions.AI message.</summary>
        internal static ChatMessage FromContextd(Message message)
        {
            var contents = new List<AIContent>();
            switch (message.Role)
            {
                case Role.Tool:
                    contents.Add(new FunctionResultContent(message.ToolCallId, message.Content));
                    break;
                default:
                    if (message.Parts.Count > 0)
                    {
                        contents.AddRange(message.Parts.Select(FromPart));
                    }
                    else if (message.Content.Length > 0)
                    {
                        contents.Add(new TextContent(message.Content));
                    }
                    contents.AddRange(message.ToolCalls.Select(ToFunctionCall));
                    break;
            }
            return new ChatMessage(ToChatRole(message.Role), contents) { RawRepresentation = message };
        }

        private static AIContent FromPart(ContentPart part) => part.PartCase switch
        {
            ContentPart.PartOneofCase.Text => new TextContent(part.Text),
            ContentPart.PartOneofCase.Image when part.Image.SourceCase == ImagePart.SourceOneofCase.Url =>
                new UriContent(part.Image.Url, string.IsNullOrEmpty(part.Image.MediaType) ? "image/*" : part.Image.MediaType),
            ContentPart.PartOneofCase.Image => new DataContent(part.Image.Data.ToByteArray(), part.Image.MediaType),
            _ => throw ContextdException.Protocol("a content part of a kind this client does not know: " + part.PartCase),
        };

        internal static ChatRole ToChatRole(Role role) => role switch
        {
            Role.System => ChatRole.System,
            Role.User => ChatRole.User,
            Role.Assistant => ChatRole.Assistant,
            Role.Tool => ChatRole.Tool,
            _ => throw ContextdException.Protocol("a message with a role this client does not know: " + role),
        };

        /// <summary>A turn's token usage as Microsoft.Extensions.AI counts it.</summary>
        internal static UsageDetails ToUsage(TokenUsage usage)
        {
            var details = new UsageDetails
            {
                InputTokenCount = usage.PromptTokens,
                OutputTokenCount = usage.CompletionTokens,
                TotalTokenCount = (long)usage.PromptTokens + usage.CompletionTokens,
                CachedInputTokenCount = usage.CacheReadTokens,
                AdditionalCounts = new AdditionalPropertiesDictionary<long>
                {
                    [ContextdProperties.PromptTokensEstimate] = usage.PromptTokensEstimate,
                    [ContextdProperties.CacheWriteTokens] = usage.CacheWriteTokens,
                    // 1 when contextd counted a figure itself (the provider reported none).
                    [ContextdProperties.Estimated] = usage.Estimated ? 1 : 0,
                },
            };
            return details;
        }
    }
}
