"""What the model APIs served on the web port (OpenAI's and Anthropic's) share: typed
reads of a JSON body, failures and the native statuses mapped to them, where each
native field came from in the request, and the HTTP side of a native turn."""
