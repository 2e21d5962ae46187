"""coremem over the Model Context Protocol: the memory and thread tools and the injection block resource, with
exactly the access rules of the REST API (one request context per call, built by backend/contexts.py).

credential.py names the caller, server.py builds the SDK server, catalog.py says what a caller is offered,
thread_tools.py holds the thread tools, http.py mounts it at `/mcp` (streamable HTTP) and stdio.py serves one
credential over stdin/stdout."""
