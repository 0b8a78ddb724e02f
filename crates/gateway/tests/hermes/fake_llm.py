#!/usr/bin/env python3
"""A scripted OpenAI-compatible LLM endpoint for driving real Hermes in tests.

Standard library only, so it runs with whatever Python the Hermes venv has.

    fake_llm.py --port PORT --script SCRIPT.json --log REQUESTS.jsonl [--ready-file PATH]
                [--parent-pid PID]

Endpoints:
  GET  /v1/models             the scripted models (first: `fake-model`), each with a context_length
  POST /v1/chat/completions   streamed (SSE) or not, answered from the script
  anything else               404 (Hermes probes a few provider-specific paths; they must fail)

The script is a JSON list of rules, or an object {"rules": [...], "models": [...],
"context_length": N}. It is re-read whenever the file changes, so a test can change the script
between turns. The first rule whose conditions all hold answers the request:

  match       case-insensitive substring of the last user message's text
  after_tool  false (default): the last message is not a tool result; true: it is; an integer N:
              it is, and it is the N-th tool round since the last user message; "any": either
  tool        name of the tool whose result is the last message
  system      case-insensitive substring of the system prompt
  kind        "turn" (default: streamed or tool-carrying requests), "title" (the non-streamed side
              call asking for a session title), "side" (other non-streamed side calls), "any"
  times       the rule answers at most this many requests

A rule's "reply":

  content        final text; "{last_user}" is replaced by the last user message's text
  chunks         the content as explicit stream chunks (default: content split into a few pieces);
                 "{now_ns}" in a streamed chunk becomes the time it is written, in unix nanoseconds
  reasoning      text streamed as delta.reasoning_content before the content
  tool_calls     [{"name": ..., "arguments": {...} or "json text"}]; every call gets a unique id
  delay          seconds to sleep before each streamed chunk (slow turns, for cancel tests)
  initial_delay  seconds to sleep before the first chunk
  status, error  answer with this HTTP status and error message instead

Without a matching rule, turns and side calls get "OK: <last user text>" and title calls get
"Fake Title". Every request is logged as one JSON line (the body without the tool schemas, plus
derived fields); a stream the client abandons adds an {"event": "client disconnected mid-stream"}
line. Nothing is printed on stdout.
"""

import argparse
import json
import os
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_MODELS = ["fake-model", "fake-model-2"]
DEFAULT_CONTEXT_LENGTH = 65536
DEFAULT_TITLE = "Fake Title"
# In a streamed chunk, replaced by the time the chunk is written (unix nanoseconds), so a
# benchmark can measure when each piece of an answer reaches a screen.
STAMP = "{now_ns}"


class Script:
    """The rules, reloaded when the file changes, with per-rule use counts."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.mtime = None
        self.rules = []
        self.models = DEFAULT_MODELS
        self.context_length = DEFAULT_CONTEXT_LENGTH
        self.uses = {}

    def _reload(self):
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self.mtime:
            return
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, list):
            data = {"rules": data}
        self.rules = data.get("rules", [])
        self.models = data.get("models", DEFAULT_MODELS)
        self.context_length = data.get("context_length", DEFAULT_CONTEXT_LENGTH)
        self.uses = {}
        self.mtime = stamp

    def snapshot(self):
        with self.lock:
            self._reload()
            return self.models, self.context_length

    def pick(self, facts):
        """Returns (rule index, reply) of the first matching rule, counting the use."""
        with self.lock:
            self._reload()
            for index, rule in enumerate(self.rules):
                if not rule_matches(rule, facts):
                    continue
                times = rule.get("times")
                if times is not None and self.uses.get(index, 0) >= times:
                    continue
                self.uses[index] = self.uses.get(index, 0) + 1
                return index, rule.get("reply", {})
        return None, None


def rule_matches(rule, facts):
    kind = rule.get("kind", "turn")
    if kind != "any" and kind != facts["kind"]:
        return False
    after_tool = rule.get("after_tool", False)
    if after_tool == "any":
        pass
    elif after_tool is True:
        if facts["tool_round"] == 0:
            return False
    elif after_tool is False or after_tool is None:
        if facts["tool_round"] != 0:
            return False
    elif facts["tool_round"] != after_tool:
        return False
    needle = rule.get("match")
    if needle is not None and needle.lower() not in facts["last_user"].lower():
        return False
    tool = rule.get("tool")
    if tool is not None and tool != facts["last_tool"]:
        return False
    system = rule.get("system")
    if system is not None and system.lower() not in facts["system"].lower():
        return False
    return True


def text_of(content):
    """The text of a message's content, whether a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(part.get("text", ""))
        return "\n".join(parts)
    return ""


def has_image(messages):
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") in ("image_url", "input_image"):
                    return True
    return False


def request_facts(body):
    messages = body.get("messages") or []
    last_user = ""
    last_user_index = -1
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            last_user = text_of(messages[index].get("content"))
            last_user_index = index
            break
    # Tool rounds since the last user message: one per assistant message carrying tool calls.
    tool_round = 0
    last = messages[-1] if messages else {}
    last_tool = None
    if last.get("role") == "tool":
        for message in messages[last_user_index + 1:]:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                tool_round += 1
        wanted = last.get("tool_call_id")
        for message in reversed(messages):
            for call in message.get("tool_calls") or []:
                if call.get("id") == wanted:
                    last_tool = (call.get("function") or {}).get("name")
                    break
            if last_tool:
                break
    system = "\n".join(
        text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    stream = bool(body.get("stream"))
    tools = body.get("tools") or []
    if stream or tools:
        kind = "turn"
    elif "title" in system.lower():
        kind = "title"
    else:
        kind = "side"
    return {
        "kind": kind,
        "stream": stream,
        "last_user": last_user,
        "last_role": last.get("role"),
        "tool_round": tool_round,
        "last_tool": last_tool,
        "system": system,
        "tool_names": sorted(
            (t.get("function") or {}).get("name", "") for t in tools if isinstance(t, dict)
        ),
    }


def split_chunks(text, pieces=3):
    """Splits text into about `pieces` chunks at word boundaries, keeping every character."""
    if not text:
        return []
    words = text.split(" ")
    if len(words) <= 1:
        return [text]
    per = max(1, -(-len(words) // pieces))
    chunks = []
    for start in range(0, len(words), per):
        chunk = " ".join(words[start:start + per])
        if start + per < len(words):
            chunk += " "
        chunks.append(chunk)
    return chunks


def estimate_tokens(text):
    return max(1, len(text) // 4)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1"

    # Set on the class by main().
    script = None
    log_file = None
    log_lock = threading.Lock()
    call_counter = [0]
    counter_lock = threading.Lock()

    def log_message(self, format, *args):
        # Access logs go to stderr (redirected to a file by the launcher), never stdout.
        sys.stderr.write("fake-llm: " + (format % args) + "\n")

    # -- helpers ---------------------------------------------------------------------------

    def log(self, entry):
        entry = dict(entry)
        entry.setdefault("t", time.time())
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.log_lock:
            with open(self.log_file, "a", encoding="utf-8") as f:
                f.write(line)

    def send_json(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def next_call_id(self):
        with self.counter_lock:
            self.call_counter[0] += 1
            n = self.call_counter[0]
        # Unique across restarts too: Hermes keeps ids in the session history and loops on
        # duplicates.
        return "call_%d_%s" % (n, uuid.uuid4().hex[:12])

    # -- routes ----------------------------------------------------------------------------

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/v1/models":
            models, context_length = self.script.snapshot()
            self.log({"method": "GET", "path": self.path, "status": 200})
            self.send_json(200, {
                "object": "list",
                "data": [
                    {
                        "id": model,
                        "object": "model",
                        "created": 0,
                        "owned_by": "iris-tests",
                        "context_length": context_length,
                    }
                    for model in models
                ],
            })
            return
        self.not_found("GET")

    def do_HEAD(self):
        self.log({"method": "HEAD", "path": self.path, "status": 404})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def not_found(self, method):
        self.log({"method": method, "path": self.path, "status": 404})
        self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        try:
            self.post()
        except Exception as error:
            # A broken script must show up in the test's request log, not as a silent hang-up
            # that Hermes retries for a minute.
            traceback.print_exc()
            self.log({"event": "handler error", "path": self.path, "error": repr(error)})
            try:
                self.send_json(500, {"error": {"message": "fake LLM error: %r" % (error,)}})
            except Exception:
                pass

    def post(self):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self.not_found("POST")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.log({"method": "POST", "path": self.path, "status": 400})
            self.send_json(400, {"error": {"message": "body is not JSON"}})
            return
        facts = request_facts(body)
        rule, reply = self.script.pick(facts)
        if reply is None:
            if facts["kind"] == "title":
                reply = {"content": DEFAULT_TITLE}
            else:
                reply = {"content": "OK: {last_user}"}
        reply = dict(reply)
        # Reasoning may be given as text or as explicit chunks; keep both forms.
        reasoning = reply.get("reasoning")
        if isinstance(reasoning, list):
            reply["reasoning_chunks"] = reasoning
            reply["reasoning"] = "".join(reasoning)
        elif isinstance(reasoning, str):
            reply["reasoning_chunks"] = split_chunks(reasoning)
        content = reply.get("content")
        if isinstance(content, str):
            reply["content"] = content.replace("{last_user}", facts["last_user"])
        if "chunks" in reply:
            reply["chunks"] = [c.replace("{last_user}", facts["last_user"]) for c in reply["chunks"]]
            reply.setdefault("content", "".join(reply["chunks"]))
        calls = []
        for call in reply.get("tool_calls") or []:
            arguments = call.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            calls.append({"id": self.next_call_id(), "name": call["name"], "arguments": arguments})

        prompt_text = json.dumps(body.get("messages") or [])
        output_text = (reply.get("reasoning") or "") + (reply.get("content") or "")
        output_text += "".join(c["arguments"] for c in calls)
        usage = {
            "prompt_tokens": estimate_tokens(prompt_text),
            "completion_tokens": estimate_tokens(output_text),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]

        logged = {k: v for k, v in body.items() if k != "tools"}
        self.log({
            "method": "POST",
            "path": self.path,
            "kind": facts["kind"],
            "stream": facts["stream"],
            "model": body.get("model"),
            "last_role": facts["last_role"],
            "last_user": facts["last_user"],
            "tool_round": facts["tool_round"],
            "last_tool": facts["last_tool"],
            "tool_names": facts["tool_names"],
            "has_image": has_image(body.get("messages") or []),
            "rule": rule,
            "reply": {
                "content": reply.get("content"),
                "reasoning": reply.get("reasoning"),
                "tool_calls": calls,
                "status": reply.get("status"),
            },
            "usage": usage,
            "body": logged,
        })

        status = reply.get("status")
        if status:
            self.send_json(int(status), {
                "error": {"message": reply.get("error", "scripted failure"), "type": "fake_error"}
            })
            return
        model = body.get("model") or "fake-model"
        if facts["stream"]:
            self.stream(model, reply, calls, usage, body)
        else:
            self.complete(model, reply, calls, usage)

    def complete(self, model, reply, calls, usage):
        message = {"role": "assistant", "content": reply.get("content")}
        if reply.get("reasoning"):
            message["reasoning_content"] = reply["reasoning"]
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        time.sleep(float(reply.get("initial_delay", 0)))
        self.send_json(200, {
            "id": "chatcmpl-" + uuid.uuid4().hex[:16],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }],
            "usage": usage,
        })

    def stream(self, model, reply, calls, usage, body):
        completion_id = "chatcmpl-" + uuid.uuid4().hex[:16]
        created = int(time.time())
        delay = float(reply.get("delay", 0.01))

        def chunk(delta, finish_reason=None):
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        for piece in reply.get("reasoning_chunks") or []:
            events.append(chunk({"reasoning_content": piece}))
        chunks = reply.get("chunks")
        if chunks is None:
            chunks = split_chunks(reply.get("content") or "")
        for piece in chunks:
            events.append(chunk({"content": piece}))
        for index, call in enumerate(calls):
            events.append(chunk({"tool_calls": [{
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }]}))
            events.append(chunk({"tool_calls": [{
                "index": index,
                "function": {"arguments": call["arguments"]},
            }]}))
        events.append(chunk({}, "tool_calls" if calls else "stop"))
        final = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        events.append(final)

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # The stream is delimited by closing the connection.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            time.sleep(float(reply.get("initial_delay", 0)))
            for index, event in enumerate(events):
                # The delay applies between visible chunks, not before the role preamble.
                if index > 0 and delay > 0:
                    time.sleep(delay)
                data = json.dumps(event)
                if STAMP in data:
                    data = data.replace(STAMP, str(time.time_ns()))
                self.wfile.write(b"data: " + data.encode("utf-8") + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.log({"event": "client disconnected mid-stream", "path": self.path,
                      "last_user": request_facts(body)["last_user"]})


def die_with_parent(parent):
    """Exit when `parent` (the launcher shell, which then becomes Hermes by exec) goes away."""
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass
    if parent is None:
        parent = os.getppid()
    if os.getppid() != parent:
        # The parent died before the death signal was armed.
        os._exit(0)

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main():
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible fake LLM")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--ready-file")
    parser.add_argument("--parent-pid", type=int,
                        help="exit when this process (our parent) is gone")
    args = parser.parse_args()

    Handler.script = Script(args.script)
    Handler.script.snapshot()
    Handler.log_file = args.log
    server = Server((args.host, args.port), Handler)
    die_with_parent(args.parent_pid)
    if args.ready_file:
        # Written only once the socket listens, so "file exists" means "port open".
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(tmp, args.ready_file)
    sys.stderr.write("fake-llm: listening on %s:%d\n" % server.server_address[:2])
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
