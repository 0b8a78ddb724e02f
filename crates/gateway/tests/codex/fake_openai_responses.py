#!/usr/bin/env python3
"""A scripted stand-in for OpenAI's Responses API on loopback, for Codex in tests.

Answers `POST /v1/responses` (streamed as server-sent events, as Codex always asks) from the
scripted RULES below, else with one text reply, "Codex heard: <the last user text>". Every
request is appended to the log file as one JSON line. Writes the ready file once it listens;
exits when the parent pid is gone.

A rule applies when its keyword is in the last user text. Its steps are played one per request:
the first answers the user's text, each later one the tool output of the step before it (counted
by the call ids the rule gave out, so a rule plays once per conversation). A step is a shell
command (with an optional text before it) or, the last, a final text.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# keyword -> steps; a step is {"text": ...} (final) or {"text"?: ..., "command": "..."}.
RULES = {
    "run echo": [
        {"text": "Let me run it.", "command": "echo hi > greeting.txt && cat greeting.txt"},
        {"text": "The command printed hi."},
    ],
}


def typed_texts(content):
    """The user's own words in a message's content (Codex's <environment_context> left out)."""
    if isinstance(content, str):
        return [content]
    return [
        b.get("text", "")
        for b in content or []
        if isinstance(b, dict) and b.get("type") in ("input_text", "text")
        and not b.get("text", "").lstrip().startswith(("<", "#"))
    ]


def last_user_text(body):
    for item in reversed(body.get("input") or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        words = typed_texts(item.get("content"))
        if words:
            return words[-1].strip()
    return ""


def answered_steps(body, rule):
    """Tool outputs in the conversation for calls this rule made (call ids `call_r<rule>s…`)."""
    prefix = f"call_r{rule}s"
    return sum(
        1 for item in body.get("input") or []
        if isinstance(item, dict) and item.get("type") == "function_call_output"
        and str(item.get("call_id", "")).startswith(prefix)
    )


def scripted_step(body, text):
    """The rule and step that answer this request, or (None, None)."""
    for rule, (keyword, steps) in enumerate(RULES.items()):
        if keyword in text.lower():
            done = answered_steps(body, rule)
            if done < len(steps):
                return rule, done
    return None, None


def shell_call(body, command):
    """A function call of the shell tool the request offers, in that tool's argument shape. The
    command asks to run outside the sandbox, so that Codex asks the client for permission."""
    offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if "exec_command" in offered:
        return "exec_command", {"cmd": command, "sandbox_permissions": "require_escalated",
                                "justification": "Write a greeting file"}
    if "shell_command" in offered:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-openai: " + (fmt % args) + "\n")

    def record(self, body):
        with open(self.server.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": self.command, "path": self.path, "body": body}) + "\n")

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record(None)
        self.send_json(404, {"error": {"type": "not_found", "message": self.path}})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.record(body)
        path = self.path.split("?", 1)[0]
        if path != "/v1/responses":
            self.send_json(404, {"error": {"type": "not_found", "message": path}})
            return
        heard = last_user_text(body)
        rule, index = scripted_step(body, heard)
        step = {"text": "Codex heard: " + heard} if rule is None else list(RULES.values())[rule][index]
        with self.server.lock:
            self.server.ids += 1
            n = self.server.ids
        items = []
        if step.get("text"):
            items.append({"type": "message", "id": f"msg_{n:04d}", "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": step["text"],
                                       "annotations": []}]})
        if "command" in step:
            name, arguments = shell_call(body, step["command"])
            items.append({"type": "function_call", "id": f"fc_{n:04d}", "status": "completed",
                          "call_id": f"call_r{rule}s{index}_{n:04d}", "name": name,
                          "arguments": json.dumps(arguments)})
        self.stream(f"resp_{n:04d}", body.get("model", "gpt-5"), items)

    def stream(self, response_id, model, items):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        sequence = 0

        def event(name, data):
            nonlocal sequence
            data = dict(data, type=name, sequence_number=sequence)
            sequence += 1
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        response = {"id": response_id, "object": "response", "model": model,
                    "status": "in_progress", "output": []}
        event("response.created", {"response": response})
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                event("response.output_item.added", {"output_index": index, "item": dict(
                    item, status="in_progress", content=[])})
                for i, word in enumerate(text.split(" ")):
                    event("response.output_text.delta", {
                        "item_id": item["id"], "output_index": index, "content_index": 0,
                        "delta": word if i == 0 else " " + word})
            else:
                event("response.output_item.added", {"output_index": index, "item": item})
            event("response.output_item.done", {"output_index": index, "item": item})
        usage = {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 18}
        event("response.completed", {"response": dict(
            response, status="completed", output=items, usage=usage)})


def watch_parent(pid):
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            os._exit(0)
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.log_path = args.log
    server.ids = 0
    server.lock = threading.Lock()
    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), daemon=True).start()
    open(args.ready_file, "w").close()
    server.serve_forever()


if __name__ == "__main__":
    main()
