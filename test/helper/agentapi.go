package main

// agentapi: a mock of the three model APIs that the agent CLIs of
// test/agents_test.go and docs/agents.md talk to, just enough of each for
// one turn: the first request gets one call of the CLI's shell tool
// running -run, the request that carries its result gets a final message.
// The decision is made from the request alone (no state), so a CLI's side
// requests (a title, a next-speaker check, a token count) get a final
// message too.
//
//	agentapi -addr HOST:PORT [-port-file F] [-log F] [-dump DIR] -run CMD
//	    serve until killed; F gets the port once listening; -log gets one
//	    line per request (method, path, what was answered, the tool's
//	    result the request carried); -dump DIR gets each request's body
//
// The APIs, as the CLIs pinned in test/agents_test.go use them:
//   - Anthropic Messages (Claude Code): POST /v1/messages, server-sent
//     events when "stream" is true; the tool is "Bash" {command}.
//   - OpenAI Responses (codex): POST /v1/responses, always streamed; the
//     tool is whichever shell tool the request offers ("shell" {command:
//     argv}, "shell_command" {command}, "exec_command" {cmd}).
//   - Gemini (gemini-cli): POST /v1beta/models/M:streamGenerateContent
//     (?alt=sse) and :generateContent; the tool is "run_shell_command"
//     {command}.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// finalText is what every final message says.
const finalText = "DONE"

func cmdAgentAPI(fs *flag.FlagSet) func(*common) error {
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	portFile := fs.String("port-file", "", "file to write the port to once listening")
	logPath := fs.String("log", "", "file to log each request to")
	run := fs.String("run", "", "the shell command the tool call runs")
	dump := fs.String("dump", "", "folder to write each request's body to (to adapt the mock to a new CLI version)")
	return func(c *common) error {
		if *run == "" {
			return fmt.Errorf("agentapi: -run is required")
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		a := &agentAPI{run: *run, dump: *dump}
		if *logPath != "" {
			f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				return err
			}
			a.log = f
		}
		if *portFile != "" {
			port := ln.Addr().(*net.TCPAddr).Port
			// Written whole, then renamed: a reader never sees half a number.
			if err := os.WriteFile(*portFile+".tmp", []byte(fmt.Sprint(port)), 0o644); err != nil {
				return err
			}
			if err := os.Rename(*portFile+".tmp", *portFile); err != nil {
				return err
			}
		}
		return http.Serve(ln, a)
	}
}

type agentAPI struct {
	run  string
	dump string
	seq  atomic.Int64 // ids of the answers
	reqs atomic.Int64 // requests seen, to name the dumps
	mu   sync.Mutex
	log  io.Writer
}

func (a *agentAPI) logf(format string, args ...any) {
	if a.log == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.log, format+"\n", args...)
}

func (a *agentAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if a.dump != "" {
		os.WriteFile(filepath.Join(a.dump, fmt.Sprintf("%03d.json", a.reqs.Add(1))), body, 0o644)
	}
	path := r.URL.Path
	var answer string
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		answer = "count"
		writeJSON(w, map[string]any{"input_tokens": 10})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		answer = a.anthropic(w, body)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		answer = a.openAI(w, body)
	case r.Method == http.MethodPost && strings.Contains(path, ":countTokens"):
		answer = "count"
		writeJSON(w, map[string]any{"totalTokens": 10})
	case r.Method == http.MethodPost && (strings.Contains(path, ":streamGenerateContent") || strings.Contains(path, ":generateContent")):
		answer = a.gemini(w, body, strings.Contains(path, ":streamGenerateContent"))
	default:
		answer = "404"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"code":404,"message":"agentapi mock: no such endpoint %s %s"}}`, r.Method, path)
	}
	a.logf("%s %s -> %s", r.Method, r.URL.RequestURI(), answer)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sse writes one server-sent event (an empty name: data alone) and
// flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", mustJSON(data))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// anthropic answers a Messages request: a Bash tool_use when the tool is
// offered and no tool_result came back yet, else the final text.
func (a *agentAPI) anthropic(w http.ResponseWriter, body []byte) string {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "bad request"
	}
	answered, result := false, ""
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(m.Content, &blocks) // a plain string has no blocks
		for _, b := range blocks {
			if b.Type == "tool_result" {
				answered, result = true, string(b.Content)
			}
		}
	}
	offered := false
	for _, t := range req.Tools {
		offered = offered || t.Name == "Bash"
	}
	n := a.seq.Add(1)
	var block map[string]any
	input := map[string]any{"command": a.run, "description": "Run the mock's command"}
	stop, what := "end_turn", "text"
	if offered && !answered {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_mock%d", n), "name": "Bash", "input": input}
		stop, what = "tool_use", "tool_use Bash"
	} else {
		block = map[string]any{"type": "text", "text": finalText}
		what = "text after tool result " + result
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	msg := map[string]any{"id": fmt.Sprintf("msg_mock%d", n), "type": "message", "role": "assistant", "model": req.Model,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage, "content": []any{block}}
	if !req.Stream {
		writeJSON(w, msg)
		return what
	}
	startSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	if block["type"] == "tool_use" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": "Bash", "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": mustJSON(input)}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": finalText}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
	return what
}

// openAI answers a Responses request (always streamed, as codex asks): a
// call of the shell tool the request offers until an output of it came
// back, else the final message.
func (a *agentAPI) openAI(w http.ResponseWriter, body []byte) string {
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
			Tools  []openAITool    `json:"tools"` // an additional_tools item
		} `json:"input"`
		Tools []openAITool `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "bad request"
	}
	answered, result := false, ""
	tools := flatTools(req.Tools)
	for _, in := range req.Input {
		if strings.HasSuffix(in.Type, "_call_output") {
			answered, result = true, string(in.Output)
		}
		tools = append(tools, flatTools(in.Tools)...)
	}
	n := a.seq.Add(1)
	var item map[string]any
	what := "message"
	if !answered {
		for _, t := range tools {
			var args any
			switch t.Name {
			case "exec":
				// Code mode (codex's default model): one JavaScript cell
				// that calls the nested exec_command tool.
				if t.Type != "custom" {
					continue
				}
				item = map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_mock%d", n), "call_id": fmt.Sprintf("call_mock%d", n),
					"name": t.Name, "status": "completed",
					"input": fmt.Sprintf("const r = await tools.exec_command({cmd: %s});\ntext(r);\n", mustJSON(a.run))}
				what = "custom_tool_call exec"
			case "shell":
				args = map[string]any{"command": []string{"sh", "-c", a.run}}
			case "shell_command":
				args = map[string]any{"command": a.run}
			case "exec_command":
				args = map[string]any{"cmd": a.run}
			default:
				continue
			}
			if item != nil {
				break
			}
			item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_mock%d", n), "call_id": fmt.Sprintf("call_mock%d", n),
				"name": t.Name, "arguments": mustJSON(args), "status": "completed"}
			what = "function_call " + t.Name
			break
		}
	}
	if item == nil {
		if answered {
			what = "message after tool result " + result
		} else {
			var names []string
			for _, t := range tools {
				names = append(names, t.Type+":"+t.Name)
			}
			what = "message: no shell tool among " + strings.Join(names, ", ")
		}
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_mock%d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": finalText, "annotations": []any{}}}}
	}
	id := fmt.Sprintf("resp_mock%d", n)
	startSSE(w)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
	return what
}

// openAITool is a tool a Responses request offers; a namespace holds more.
type openAITool struct {
	Type  string       `json:"type"`
	Name  string       `json:"name"`
	Tools []openAITool `json:"tools"`
}

// flatTools lists the tools, those inside namespaces included.
func flatTools(ts []openAITool) []openAITool {
	var out []openAITool
	for _, t := range ts {
		out = append(out, t)
		out = append(out, flatTools(t.Tools)...)
	}
	return out
}

// gemini answers a generateContent request: a run_shell_command call when
// the tool is offered and no functionResponse came back yet, else the
// final text (JSON when the request asks for JSON: gemini-cli's side
// questions, such as who speaks next, are answered "the user"; the model
// router is told the task is simple).
func (a *agentAPI) gemini(w http.ResponseWriter, body []byte, stream bool) string {
	var req struct {
		Contents []struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType string `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "bad request"
	}
	answered, result := false, ""
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if r, ok := p["functionResponse"]; ok {
				answered, result = true, string(r)
			}
		}
	}
	offered := false
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			offered = offered || f.Name == "run_shell_command"
		}
	}
	var part map[string]any
	what := "text"
	switch {
	case offered && !answered:
		part = map[string]any{"functionCall": map[string]any{"name": "run_shell_command",
			"args": map[string]any{"command": a.run, "description": "Run the mock's command"}}}
		what = "functionCall run_shell_command"
	case req.GenerationConfig.ResponseMimeType == "application/json":
		part = map[string]any{"text": mustJSON(map[string]any{"next_speaker": "user", "reasoning": "the mock is done", "model_choice": "flash",
			"complexity_reasoning": "one command", "complexity_score": 1})}
		what = "json"
	default:
		part = map[string]any{"text": finalText}
		if answered {
			what = "text after tool result " + result
		}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "mock",
	}
	if !stream {
		writeJSON(w, resp)
		return what
	}
	startSSE(w)
	sse(w, "", resp)
	return what
}
