#!/usr/bin/env python3
"""A scripted stand-in for Anthropic's Messages API on loopback, for Claude Code in tests.

Answers `POST /v1/messages` from the scripted RULES below, else with one text reply, "Claude
heard: <the last user text>"; streamed as the standard SSE sequence when the request asks for
`stream: true`, else as one JSON message. `POST /v1/messages/count_tokens` answers a fixed count.
Every request is appended to the log file as one JSON line. Writes the ready file once it listens;
exits when the parent pid is gone.

A rule applies when its keyword is in the last user text and the request offers the tools the
rule uses (Claude Code's side requests offer none). Its steps are played one per request: the
first answers the user's text, each later one the tool result of the step before it (counted by
the tool-use ids the rule gave out, so a rule plays once per conversation). A step is a
`tool_use` block (with an optional text before it) or, the last, a final text.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# keyword -> steps; a step is {"text": ...} (final) or {"text"?: ..., "tool": name, "input": {...}}.
RULES = {
    "run echo": [
        {"text": "Let me run it.", "tool": "Bash",
         "input": {"command": "echo hi > greeting.txt && cat greeting.txt",
                   "description": "Write and show a greeting"}},
        {"text": "The command printed hi."},
    ],
    "make a plan": [
        {"tool": "TodoWrite", "input": {"todos": [
            {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
            {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
            {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
        ]}},
        {"text": "Run echo next."},
    ],
    "ask me a question": [
        {"tool": "AskUserQuestion", "input": {"questions": [
            {"question": "Which color do you prefer?", "header": "Color", "multiSelect": False,
             "options": [{"label": "Red", "description": "A warm color"},
                         {"label": "Blue", "description": "A cool color"}]},
        ]}},
        {"text": "Noted your color."},
    ],
    "ask me again": [
        {"tool": "AskUserQuestion", "input": {"questions": [
            {"question": "Which fruit do you like?", "header": "Fruit", "multiSelect": False,
             "options": [{"label": "Apple", "description": "Crisp"},
                         {"label": "Pear", "description": "Soft"}]},
        ]}},
        {"text": "Noted your fruit."},
    ],
    "ask me twice": [
        {"tool": "AskUserQuestion", "input": {"questions": [
            {"question": "Which pet do you have?", "header": "Pet", "multiSelect": False,
             "options": [{"label": "Cat", "description": "Purrs"},
                         {"label": "Dog", "description": "Barks"}]},
            {"question": "Which drinks do you like?", "header": "Drinks", "multiSelect": True,
             "options": [{"label": "Tea", "description": "Hot"},
                         {"label": "Juice", "description": "Cold"}]},
        ]}},
        {"text": "Noted your pet and drinks."},
    ],
}


# Seconds between a text block and the tool_use block after it (see `Handler.stream`).
TEXT_BEFORE_TOOL_PAUSE = 0.5


def typed_texts(content):
    """The user's own words in a message's content (Claude Code's <system-reminder>s left out)."""
    if isinstance(content, str):
        return [content]
    return [
        b.get("text", "")
        for b in content or []
        if isinstance(b, dict) and b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<")
    ]


def answered_steps(body, rule):
    """Tool results in the conversation for tool calls this rule made (ids `toolu_r<rule>s…`).
    Claude Code merges and reorders the user's messages, so results are counted, not rounds."""
    prefix = f"toolu_r{rule}s"
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if (isinstance(block, dict) and block.get("type") == "tool_result"
                    and str(block.get("tool_use_id", "")).startswith(prefix)):
                count += 1
    return count


def scripted_step(body, text):
    """The rule and step that answer this request, or (None, None)."""
    offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    for rule, (keyword, steps) in enumerate(RULES.items()):
        if keyword not in text.lower():
            continue
        if not all(s["tool"] in offered for s in steps if "tool" in s):
            continue
        done = answered_steps(body, rule)
        if done < len(steps):
            return rule, done
    return None, None


def last_user_text(body):
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        words = typed_texts(message.get("content"))
        if words:
            return words[-1].strip()
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-anthropic: " + (fmt % args) + "\n")

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
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        self.record(body)
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages/count_tokens":
            self.send_json(200, {"input_tokens": 12})
            return
        if path != "/v1/messages":
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
            return
        heard = last_user_text(body)
        rule, index = scripted_step(body, heard)
        if rule is None:
            step = {"text": "Claude heard: " + heard}
        else:
            step = list(RULES.values())[rule][index]
        blocks = []
        if step.get("text"):
            blocks.append({"type": "text", "text": step["text"]})
        if "tool" in step:
            self.server.tool_ids += 1
            blocks.append({"type": "tool_use",
                           "id": f"toolu_r{rule}s{index}_{self.server.tool_ids:04d}",
                           "name": step["tool"], "input": step["input"]})
        stop_reason = "tool_use" if "tool" in step else "end_turn"
        model = body.get("model", "claude-sonnet-4-5")
        if not body.get("stream"):
            self.send_json(200, {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 6},
            })
            return
        self.stream(model, blocks, stop_reason)

    def stream(self, model, blocks, stop_reason):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(name, data):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        event("message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1}}})
        pieces = 0
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                event("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "text", "text": ""}})
                for i, word in enumerate(block["text"].split(" ")):
                    pieces += 1
                    event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "text_delta",
                                                            "text": word if i == 0 else " " + word}})
            else:
                if index > 0:
                    # Claude Code may ask for the tool's permission before its adapter has
                    # forwarded the text streamed ahead of it, which then reaches the client
                    # after the tool call; a pause lets the text go first.
                    time.sleep(TEXT_BEFORE_TOOL_PAUSE)
                start = dict(block, input={})
                event("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": start})
                event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": json.dumps(block["input"])}})
                pieces += 1
            event("content_block_stop", {"type": "content_block_stop", "index": index})
        event("message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                "usage": {"output_tokens": pieces}})
        event("message_stop", {"type": "message_stop"})


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
    server.tool_ids = 0
    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), daemon=True).start()
    open(args.ready_file, "w").close()
    server.serve_forever()


if __name__ == "__main__":
    main()
