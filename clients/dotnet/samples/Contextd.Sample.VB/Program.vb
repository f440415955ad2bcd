' The add-in flow against a running contextd, step by step:
'   1. a new session for the user, in the "excel" scenario;
'   2. BuildMessages in session mode (what the model would see, and why);
'   3. StreamChat, printing each text delta as it arrives;
'   4. Collect the answer (and remember it as a memory of the user), then end the session;
'   5. the same through Microsoft.Extensions.AI: ContextdChatClient as an IChatClient (the
'      session is the ConversationId), and ContextdChatReducer fitting the add-in's own
'      history to a token budget, for an add-in that calls its model itself;
'   6. what a rejected request looks like (ContextdException with field violations).
'
' Configuration (environment):
'   CONTEXTD_ADDRESS           gRPC address, default 127.0.0.1:50151
'   CONTEXTD_GRPC_WEB_ADDRESS  when set, talk gRPC-Web (HTTP/1.1) to this address instead,
'                              as a .NET Framework 4.8 add-in must
'   CONTEXTD_USER              user id, default vb-sample (with a key: the key's user)
'   CONTEXTD_API_KEY           an API key of `contextd keys create`, for a server started
'                              with --auth api-key (kept out of the source and the output)
' Ctrl+C cancels the turn being streamed.

Imports System.Threading
Imports Contextd.Client
Imports Contextd.V1
Imports Grpc.Net.Client.Web
Imports Microsoft.Extensions.AI

Module Program

    Function Main() As Integer
        Return RunAsync().GetAwaiter().GetResult()
    End Function

    Private Async Function RunAsync() As Task(Of Integer)
        Dim address = If(Environment.GetEnvironmentVariable("CONTEXTD_ADDRESS"), "127.0.0.1:50151")
        Dim webAddress = Environment.GetEnvironmentVariable("CONTEXTD_GRPC_WEB_ADDRESS")
        Dim apiKey = Environment.GetEnvironmentVariable("CONTEXTD_API_KEY")
        ' With a key, an empty user id means the key's own user.
        Dim defaultUser = If(String.IsNullOrEmpty(apiKey), "vb-sample", "")
        Dim userId = If(Environment.GetEnvironmentVariable("CONTEXTD_USER"), defaultUser)

        Dim options As New ContextdClientOptions With {
            .Timeout = TimeSpan.FromSeconds(30),
            .StreamTimeout = TimeSpan.FromMinutes(5)
        }
        If Not String.IsNullOrEmpty(apiKey) Then
            ' Sent as "authorization: Bearer <key>" with every call.
            options.ApiKey = apiKey
        End If
        If Not String.IsNullOrEmpty(webAddress) Then
            ' The gRPC-Web switch: HTTP/1.1, so it works on .NET Framework 4.8.
            options.UseGrpcWeb = True
            options.GrpcWebAddress = webAddress
            options.GrpcWebMode = GrpcWebMode.GrpcWebText
        End If

        ' Never disposed: the handler may still fire while the program ends.
        Dim cancel As New CancellationTokenSource()
        AddHandler Console.CancelKeyPress,
            Sub(sender, e)
                e.Cancel = True
                cancel.Cancel()
            End Sub

        Using client As New ContextdClient(address, options)
            Console.WriteLine($"contextd at {client.Target}")
            Try
                Await RunFlowAsync(client, userId, cancel.Token)
                Await RunChatClientAsync(client, userId, cancel.Token)
                Await ShowRejectedRequestAsync(client)
                Return 0
            Catch ex As ContextdException
                Console.Error.WriteLine($"contextd said {ex.StatusCode}: {ex.Detail}")
                For Each violation In ex.FieldViolations
                    Console.Error.WriteLine($"  {violation.Field}: {violation.Description}")
                Next
                Return 1
            Catch ex As OperationCanceledException
                Console.Error.WriteLine("cancelled")
                Return 1
            End Try
        End Using
    End Function

    Private Async Function RunFlowAsync(client As ContextdClient, userId As String, cancellationToken As CancellationToken) As Task
        ' 1. A new session: a fresh window; the user's memories carry over.
        Dim created = Await client.CreateSessionAsync(New CreateSessionRequest With {
            .UserId = userId,
            .Scenario = "excel",
            .Host = "excel",
            .Title = "Quarterly budget"
        }, cancellationToken)
        Dim sessionId = created.Session.Id
        Console.WriteLine($"session {sessionId}")

        Dim question = "Which formula sums column B where column A says ""Travel""?"

        ' 2. What the model would see for this question, built from the stored session.
        Dim context As New SessionContext With {
            .UserId = userId,
            .SessionId = sessionId,
            .Scenario = "excel",
            .Host = "excel"
        }
        context.Variables.Add("sheet", "Budget 2026")
        Dim built = Await client.BuildMessagesAsync(New BuildMessagesRequest With {
            .Session = context,
            .UserMessage = question,
            .TokenBudget = 4000,
            .OutputFormat = OutputFormat.Openai
        }, cancellationToken)
        Console.WriteLine($"BuildMessages: {built.Messages.Count} messages, {built.Report.TotalTokens} of {built.Report.TokenBudget} tokens")
        For Each layer In built.Report.ContextLayers
            Console.WriteLine($"  [{layer.Name}] included={layer.Included} tokens={layer.Tokens} {layer.Note}")
        Next

        ' 3. The chat turn itself, deltas printed as they arrive.
        Dim turn As New StreamChatRequest With {
            .Session = New SessionContext With {
                .UserId = userId,
                .SessionId = sessionId,
                .Scenario = "excel",
                .Host = "excel"
            },
            .UserMessage = question,
            .Mode = "sample"
        }
        ' RunChatTurnAsync calls PrintEvent for each event on the thread that read it. A task
        ' pane passes a Progress(Of StreamChatResponse) made on its UI thread instead, whose
        ' handler runs there, in order: New Progress(Of StreamChatResponse)(AddressOf ShowEvent).
        Console.Write("answer: ")
        Dim completed = Await client.RunChatTurnAsync(turn, AddressOf PrintEvent, cancellationToken)
        Console.WriteLine()
        Console.WriteLine($"turn {completed.Status} in {completed.DurationMs} ms, prompt tokens {completed.TurnUsage.PromptTokensEstimate} (estimate)")
        If completed.Status = TurnStatus.[Error] Then
            Console.WriteLine($"model error: {completed.ErrorMessage}")
            Return
        End If

        ' 4. The user liked the answer: collect it and keep it as a memory.
        If completed.AssistantMessageId <> "" Then
            Dim collected = Await client.CollectAsync(New CollectRequest With {
                .UserId = userId,
                .MessageId = completed.AssistantMessageId,
                .Remember = True
            }, cancellationToken)
            Console.WriteLine($"collected {collected.MessageId}: {collected.IsCollected}, memory {collected.MemoryId}")
        End If

        ' The add-in is done with this session: its event log gets session_end.
        Dim ended = Await client.EndSessionAsync(New EndSessionRequest With {
            .UserId = userId,
            .SessionId = sessionId,
            .Mode = "sample"
        }, cancellationToken)
        Console.WriteLine($"session ended: {ended.Ended}")
    End Function

    ' 5. Microsoft.Extensions.AI: the host composes its AI through IChatClient.
    Private Async Function RunChatClientAsync(client As ContextdClient, userId As String, cancellationToken As CancellationToken) As Task
        Dim chat As IChatClient = New ContextdChatClient(client, New ContextdChatClientOptions With {
            .UserId = userId,
            .Scenario = "excel",
            .Host = "excel",
            .Mode = "sample"
        })
        ' No ConversationId: a new contextd session; the response names it.
        Dim first = Await chat.GetResponseAsync("What does SUMIF do?", Nothing, cancellationToken)
        Console.WriteLine($"IChatClient: {first.Text}")
        Console.WriteLine($"  conversation {first.ConversationId}, finish {first.FinishReason}, " &
                          $"tokens in {first.Usage.InputTokenCount} out {first.Usage.OutputTokenCount}")
        ' The ConversationId continues the session: send only the new message.
        Dim followUp As New List(Of ChatMessage) From {New ChatMessage(ChatRole.User, "And SUMIFS?")}
        Dim second = Await chat.GetResponseAsync(followUp, New ChatOptions With {.ConversationId = first.ConversationId}, cancellationToken)
        Console.WriteLine($"IChatClient, same conversation: {second.Text}")
        Await client.EndSessionAsync(New EndSessionRequest With {
            .UserId = userId,
            .SessionId = first.ConversationId,
            .Mode = "sample"
        }, cancellationToken)

        ' An add-in that calls its own model fits its history to the budget with contextd.
        Dim history As New List(Of ChatMessage) From {New ChatMessage(ChatRole.System, "You are an Excel expert.")}
        For i = 1 To 6
            history.Add(New ChatMessage(ChatRole.User, $"Question {i}: which formula sums the travel costs?"))
            history.Add(New ChatMessage(ChatRole.Assistant, $"Answer {i}: =SUMIF(A:A, ""Travel"", B:B)"))
        Next
        history.Add(New ChatMessage(ChatRole.User, "And for March only?"))
        Dim reducer As New ContextdChatReducer(client, New ContextdChatReducerOptions With {
            .TokenBudget = 100,
            .Tokenizer = "cl100k_base"
        })
        Dim reduction = Await reducer.ReduceWithReportAsync(history, cancellationToken)
        Console.WriteLine($"IChatReducer: kept {reduction.Messages.Count} of {history.Count} messages, " &
                          $"{reduction.Report.TotalTokens} of {reduction.Report.TokenBudget} tokens")
        For Each dropped In reduction.Report.Dropped
            Console.WriteLine($"  dropped {dropped.Count} from {dropped.StartIndex}: {dropped.Reason}")
        Next
    End Function

    Private Sub PrintEvent(ev As StreamChatResponse)
        Select Case ev.EventCase
            Case StreamChatResponse.EventOneofCase.TurnStarted
                Console.Write($"(turn {ev.TurnStarted.TurnIndex}, ~{ev.TurnStarted.PromptTokensEstimate} prompt tokens) ")
            Case StreamChatResponse.EventOneofCase.TextDelta
                Console.Write(ev.TextDelta.Text)
            Case StreamChatResponse.EventOneofCase.ToolCall
                Console.Write($"[tool {ev.ToolCall.[Call].Name}]")
        End Select
    End Sub

    ' 6. A request with no token budget: the server names the field.
    Private Async Function ShowRejectedRequestAsync(client As ContextdClient) As Task
        Dim bad As New BuildMessagesRequest With {.UserMessage = "hello"}
        bad.SystemPrompts.Add("You are a helpful assistant.")
        Try
            Await client.BuildMessagesAsync(bad)
        Catch ex As ContextdException When ex.StatusCode = Grpc.Core.StatusCode.InvalidArgument
            Dim fields = String.Join(", ", ex.FieldViolations.Select(Function(v) v.Field))
            Console.WriteLine($"rejected as expected: {fields}")
        End Try
    End Function

End Module
