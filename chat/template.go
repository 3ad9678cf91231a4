package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ardanlabs/jinja"
	"github.com/x/llama/internal/jsonesc"
)

// Template is a parsed chat template. Safe for concurrent use.
//
// Templates are rendered the way Hugging Face transformers renders them
// (trim_blocks and lstrip_blocks on, Python-style tojson, raise_exception,
// strftime_now), on top of github.com/ardanlabs/jinja. The few things that
// engine lacks or renders differently are supplied here, as extra globals
// and filters and a light rewrite of the source (see addExtensions).
type Template struct {
	src      string
	compiled *jinja.Template

	capsOnce sync.Once
	caps     TemplateCaps
}

// TemplateInput is what a template is rendered with.
type TemplateInput struct {
	// Messages is the conversation.
	Messages []Message
	// Tools are the functions offered to the model; none means the
	// template sees tools as none.
	Tools []Tool
	// AddGenerationPrompt asks the template to open an assistant turn.
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the model's special token texts.
	BOSToken, EOSToken string
	// Extra holds extra template variables (enable_thinking,
	// reasoning_effort, builtin_tools, ...) merged into the context.
	// Values are plain Go values (string, bool, numbers, []any,
	// map[string]any, json.RawMessage); an Extra key overrides a variable
	// of the same name set from the fields above.
	Extra map[string]any
	// Now is the time strftime_now, datetime ("%b %d %Y") and date_string
	// ("%d %b %Y", as llama.cpp sets them) render; zero means time.Now().
	Now time.Time
}

// TemplateCaps reports what a template supports. It is found by rendering
// probe conversations and looking for their markers in the output.
type TemplateCaps struct {
	// SupportsSystemRole: a system message's content reaches the prompt.
	SupportsSystemRole bool
	// SupportsTools: tool definitions reach the prompt.
	SupportsTools bool
	// SupportsToolCalls: an assistant message's tool calls reach the prompt.
	SupportsToolCalls bool
	// SupportsToolResponses: a tool message's content reaches the prompt.
	SupportsToolResponses bool
	// SupportsParallelToolCalls: a second tool call in one message reaches
	// the prompt.
	SupportsParallelToolCalls bool
	// RequiresTypedContent: content must be given as a list of typed parts
	// (a plain string does not reach the prompt).
	RequiresTypedContent bool
	// SupportsThinking: the template reacts to enable_thinking.
	SupportsThinking bool
	// ThinkingByDefault: enable_thinking changes what follows the user's
	// message (the generation prompt), so that, as with llama-server,
	// thinking is on unless a chat turns it off; a template that reacts
	// in a system block alone (Apertus's "Deliberation") is off unless a
	// chat turns it on.
	ThinkingByDefault bool
	// SupportsObjectArguments: the template reads tool call arguments as
	// an object (iterating it or printing it with tojson); otherwise they
	// are passed as the JSON text, as llama.cpp does.
	SupportsObjectArguments bool
	// SupportsPreserveReasoning: the reasoning of an assistant message
	// before the last reaches the prompt when thinking is kept
	// (preserve_thinking), as llama.cpp probes it.
	SupportsPreserveReasoning bool
	// SupportsReasoningEffort: the template reads reasoning_effort (or
	// reasoning_strength): the prompt changes with its level (none, low,
	// medium, high or max).
	SupportsReasoningEffort bool
}

// TemplateError is the error a template raised itself, through
// raise_exception.
type TemplateError struct {
	// Message is the text the template passed to raise_exception.
	Message string
}

// Error implements error.
func (e *TemplateError) Error() string { return "chat: template raised: " + e.Message }

// ParseTemplate parses a Jinja chat template.
func ParseTemplate(source string) (*Template, error) {
	if err := checkDelimiters(source); err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	if err := checkDepth(source); err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	compiled, err := compileSafely(preprocessSource(source))
	if err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	return &Template{src: source, compiled: compiled}, nil
}

// Source returns the template text as it was given to ParseTemplate.
func (t *Template) Source() string { return t.src }

// Render renders the template with a conversation. Messages are adapted to
// the template the way llama.cpp does it: the developer role becomes system
// (except for templates using <|channel|>, that is gpt-oss), a leading
// system message is merged into the next message when the template ignores
// the system role, and content is given as typed parts when the template
// only reads parts.
func (t *Template) Render(in TemplateInput) (string, error) {
	caps := t.Caps()
	msgs := make([]Message, len(in.Messages))
	copy(msgs, in.Messages)

	if !strings.Contains(t.src, "<|channel|>") {
		for i := range msgs {
			if msgs[i].Role == RoleDeveloper {
				msgs[i].Role = RoleSystem
			}
		}
	}
	if !caps.SupportsSystemRole && len(msgs) > 0 && msgs[0].Role == RoleSystem {
		if len(msgs) > 1 {
			next := msgs[1]
			next.Content = messageText(msgs[0]) + "\n" + messageText(next)
			next.Parts = nil
			msgs = append([]Message{next}, msgs[2:]...)
		} else {
			msgs = msgs[1:]
		}
	}

	mode := contentAsGiven
	if caps.RequiresTypedContent {
		mode = contentTyped
	}
	if !caps.SupportsObjectArguments {
		mode |= argsAsText
	}
	messages, err := messagesValue(msgs, mode)
	if err != nil {
		return "", err
	}
	tools, err := toolsValue(in.Tools)
	if err != nil {
		return "", err
	}
	vars := map[string]jinja.Value{
		"messages":              messages,
		"tools":                 tools,
		"add_generation_prompt": jinja.NewBool(in.AddGenerationPrompt),
		"bos_token":             jinja.NewString(in.BOSToken),
		"eos_token":             jinja.NewString(in.EOSToken),
	}
	for k, v := range in.Extra {
		jv, err := goToValue(v)
		if err != nil {
			return "", fmt.Errorf("chat: extra variable %q: %w", k, err)
		}
		vars[k] = jv
	}
	return t.render(vars, in.Now)
}

// render runs the template with prepared variables and our extensions.
func (t *Template) render(vars map[string]jinja.Value, now time.Time) (string, error) {
	if now.IsZero() {
		now = time.Now()
	}
	addExtensions(vars, now)
	out, err := renderSafely(t.compiled, vars)
	if err != nil {
		var te *TemplateError
		if errors.As(err, &te) {
			return "", te
		}
		return "", fmt.Errorf("chat: render template: %w", err)
	}
	return out, nil
}

// compileSafely compiles, turning a panic of the engine into an error.
func compileSafely(src string) (tmpl *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine panic: %v", r)
		}
	}()
	return jinja.Compile(src)
}

// renderSafely renders, turning a panic of the engine into an error.
func renderSafely(tmpl *jinja.Template, vars map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine panic: %v", r)
		}
	}()
	return tmpl.RenderValues(vars)
}

// messageText is the text of a message, its parts joined the way llama.cpp
// joins them (with newlines) when Parts is set.
func messageText(m Message) string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var sb strings.Builder
	for _, p := range m.Parts {
		if p.Type != "text" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}

func allText(parts []ContentPart) bool {
	for _, p := range parts {
		if p.Type != "text" {
			return false
		}
	}
	return true
}

type contentMode int

const (
	contentAsGiven contentMode = 0      // string, or parts when Parts is set
	contentTyped   contentMode = 1 << 0 // always a list of parts
	argsAsText     contentMode = 1 << 1 // tool call arguments as JSON text
)

// messagesValue converts messages to the list of plain maps templates
// expect, as transformers and llama.cpp pass them.
func messagesValue(msgs []Message, mode contentMode) (jinja.Value, error) {
	items := make([]jinja.Value, 0, len(msgs))
	for _, m := range msgs {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		switch {
		case len(m.Parts) > 0 && mode&contentTyped == 0 && allText(m.Parts):
			// A template that reads string content gets the text parts
			// joined, as llama.cpp does, not a list printed Python-style.
			dict.Set("content", jinja.NewString(messageText(m)))
		case len(m.Parts) > 0:
			dict.Set("content", partsValue(m.Parts))
		case mode&contentTyped != 0:
			dict.Set("content", partsValue([]ContentPart{{Type: "text", Text: m.Content}}))
		default:
			dict.Set("content", jinja.NewString(m.Content))
		}
		if m.ReasoningContent != "" {
			dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
		}
		if m.Name != "" {
			dict.Set("name", jinja.NewString(m.Name))
		}
		if m.ToolCallID != "" {
			dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, 0, len(m.ToolCalls))
			for _, tc := range m.ToolCalls {
				args := jinja.NewString(tc.Arguments)
				if mode&argsAsText == 0 {
					args = argumentsValue(tc.Arguments)
				}
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(tc.Name))
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				cd := call.AsDict()
				cd.Set("type", jinja.NewString("function"))
				cd.Set("function", fn)
				if tc.ID != "" {
					cd.Set("id", jinja.NewString(tc.ID))
				}
				calls = append(calls, call)
			}
			dict.Set("tool_calls", jinja.NewList(calls))
		}
		items = append(items, d)
	}
	return jinja.NewList(items), nil
}

// argumentsValue decodes a tool call's JSON arguments into an ordered
// value; text that is not JSON is passed as a string.
func argumentsValue(args string) jinja.Value {
	if strings.TrimSpace(args) == "" {
		return jinja.NewDict()
	}
	v, err := jsonToValue([]byte(args))
	if err != nil {
		return jinja.NewString(args)
	}
	return v
}

func partsValue(parts []ContentPart) jinja.Value {
	items := make([]jinja.Value, 0, len(parts))
	for _, p := range parts {
		d := jinja.NewDict()
		d.AsDict().Set("type", jinja.NewString(p.Type))
		d.AsDict().Set("text", jinja.NewString(p.Text))
		items = append(items, d)
	}
	return jinja.NewList(items)
}

// toolsValue converts tools to [{"type":"function","function":{...}}];
// no tools is none.
func toolsValue(tools []Tool) (jinja.Value, error) {
	if len(tools) == 0 {
		return jinja.None(), nil
	}
	items := make([]jinja.Value, 0, len(tools))
	for _, tool := range tools {
		fn := jinja.NewDict()
		fd := fn.AsDict()
		fd.Set("name", jinja.NewString(tool.Name))
		fd.Set("description", jinja.NewString(tool.Description))
		params := jinja.NewDict()
		if len(bytes.TrimSpace(tool.Parameters)) > 0 {
			v, err := jsonToValue(tool.Parameters)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("chat: tool %q parameters: %w", tool.Name, err)
			}
			params = v
		}
		fd.Set("parameters", params)
		d := jinja.NewDict()
		d.AsDict().Set("type", jinja.NewString("function"))
		d.AsDict().Set("function", fn)
		items = append(items, d)
	}
	return jinja.NewList(items), nil
}

// jsonToValue decodes JSON into a template value, keeping object key order
// (templates print tool schemas with tojson, whose output must follow the
// source order as Python's json.dumps does).
func jsonToValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Value{}, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				key, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			if items == nil {
				items = []jinja.Value{}
			}
			return jinja.NewList(items), nil
		}
		return jinja.Value{}, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return jinja.FromGoValue(t), nil
	}
}

// goToValue converts an Extra value. JSON texts (json.RawMessage) keep their
// key order; Go maps are ordered by key.
func goToValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case jinja.Value:
		return x, nil
	case json.RawMessage:
		return jsonToValue(x)
	case []byte:
		return jsonToValue(x)
	case []string:
		items := make([]jinja.Value, len(x))
		for i, s := range x {
			items[i] = jinja.NewString(s)
		}
		return jinja.NewList(items), nil
	case int32:
		return jinja.NewInt(int64(x)), nil
	case uint:
		return jinja.NewInt(int64(x)), nil
	case float32:
		return jinja.NewFloat(float64(x)), nil
	}
	// The engine converts a value recursively: one that holds itself (a
	// map put in itself) would overflow the stack, which ends the process.
	if !shallowEnough(reflect.ValueOf(v), maxExtraDepth) {
		return jinja.Undefined(), fmt.Errorf("the value nests deeper than %d or holds itself", maxExtraDepth)
	}
	return jinja.FromGoValue(v), nil
}

// MaxRangeItems is the longest list a template's range() may build.
const MaxRangeItems = 1 << 20

// boundedRange is Python's range(stop) / range(start, stop[, step]) for
// templates, refusing lists longer than MaxRangeItems.
func boundedRange(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	toInt := func(v jinja.Value) int64 {
		switch {
		case v.IsInt():
			return v.AsInt()
		case v.IsFloat():
			f := v.AsFloat()
			if f != f || f >= math.MaxInt64 || f <= math.MinInt64 {
				return 0
			}
			return int64(f)
		case v.IsBool() && v.AsBool():
			return 1
		case v.IsString():
			n, _ := strconv.ParseInt(strings.TrimSpace(v.AsString()), 10, 64)
			return n
		}
		return 0
	}
	start, step := int64(0), int64(1)
	var stop int64
	switch len(args) {
	case 1:
		stop = toInt(args[0])
	case 2, 3:
		start, stop = toInt(args[0]), toInt(args[1])
		if len(args) == 3 {
			step = toInt(args[2])
		}
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	// The count in unsigned arithmetic: the span of two int64s can
	// overflow an int64.
	var span, stride uint64
	switch {
	case step > 0 && stop > start:
		span, stride = uint64(stop)-uint64(start), uint64(step)
	case step < 0 && start > stop:
		span, stride = uint64(start)-uint64(stop), uint64(-(step+1))+1
	default:
		return jinja.NewList(nil), nil
	}
	n := span / stride
	if span%stride != 0 {
		n++
	}
	if n > MaxRangeItems {
		return jinja.Undefined(), fmt.Errorf("range: %d items; at most %d are allowed", n, MaxRangeItems)
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

// maxExtraDepth bounds the nesting of an extra variable's Go value.
const maxExtraDepth = 256

// shallowEnough reports whether v's maps, slices, arrays, pointers,
// interfaces and structs nest at most depth deep.
func shallowEnough(v reflect.Value, depth int) bool {
	if depth < 0 {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || shallowEnough(v.Elem(), depth-1)
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !shallowEnough(it.Value(), depth-1) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !shallowEnough(v.Index(i), depth-1) {
				return false
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if !shallowEnough(v.Field(i), depth-1) {
				return false
			}
		}
	}
	return true
}

// filterPrefix names our replacements of the engine's own filters; the
// source is rewritten to call them (the engine looks filters it does not
// know up among the variables).
const filterPrefix = "__chat_f_"

// overriddenFilters are engine filters whose output differs from Jinja2's.
var overriddenFilters = map[string]bool{
	"tojson": true,
}

// preprocessSource applies Jinja2's whitespace rules as transformers
// configures them (trim_blocks, lstrip_blocks, "-" markers, no trailing
// newline kept) itself and hands the engine a source without any plain
// text: each text run becomes a string literal expression. The engine's own
// trimming looks past expressions for the text to trim, which Jinja2 does
// not do; with no text left it has nothing to get wrong. Comments are
// dropped, raw blocks become text, and filters in overriddenFilters are
// renamed to reach our implementations.
func preprocessSource(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.TrimSuffix(src, "\n")
	segs := scanSegments(src)

	// Decide cuts on the original text, as Jinja2's lexer does.
	type cut struct{ start, end int }
	cuts := make([]cut, len(segs))
	for i, sg := range segs {
		cuts[i] = cut{0, len(sg.text)}
	}
	for i, sg := range segs {
		if sg.kind == segTextKind {
			continue
		}
		block := sg.kind == '%' || sg.kind == '#'
		if i > 0 && segs[i-1].kind == segTextKind {
			prev := segs[i-1].text
			switch {
			case sg.trimLeft:
				cuts[i-1].end = min(cuts[i-1].end, len(strings.TrimRightFunc(prev, unicode.IsSpace)))
			case block && !sg.plusLeft:
				k := len(strings.TrimRight(prev, " \t"))
				if k < len(prev) && (k > 0 && prev[k-1] == '\n' || k == 0 && (segs[i-1].pos == 0 || strings.Contains(prev, "\n"))) {
					cuts[i-1].end = min(cuts[i-1].end, k)
				}
			}
		}
		if i+1 < len(segs) && segs[i+1].kind == segTextKind {
			next := segs[i+1].text
			switch {
			case sg.trimRight:
				cuts[i+1].start = max(cuts[i+1].start, len(next)-len(strings.TrimLeftFunc(next, unicode.IsSpace)))
			case block && !sg.plusRight && strings.HasPrefix(next, "\n"):
				cuts[i+1].start = max(cuts[i+1].start, 1)
			}
		}
	}

	var out strings.Builder
	out.Grow(len(src) + len(src)/4)
	for i, sg := range segs {
		switch sg.kind {
		case segTextKind:
			c := cuts[i]
			if c.start >= c.end {
				continue
			}
			text := sg.text[c.start:c.end]
			out.WriteString(`{{ "`)
			for j := 0; j < len(text); j++ {
				if text[j] == '\\' || text[j] == '"' {
					out.WriteByte('\\')
				}
				out.WriteByte(text[j])
			}
			out.WriteString(`" }}`)
		case '#':
		case '{':
			out.WriteString("{{")
			out.WriteString(renameFilters(sg.text))
			out.WriteString("}}")
		case '%':
			word := tagWord(sg.text)
			if word == "endmacro" {
				out.WriteString("{{ " + macroLeave + "() }}")
			}
			out.WriteString("{%")
			out.WriteString(renameFilters(sg.text))
			out.WriteString("%}")
			if word == "macro" {
				out.WriteString("{{ " + macroEnter + "() }}")
			}
		}
	}
	return out.String()
}

// MaxTemplateDepth bounds a template's nesting: its blocks (if, for,
// macro, ...) inside one another and the brackets of one tag's
// expression. The Jinja engine parses and runs them recursively: a
// deeper template would overflow the goroutine's stack, which ends the
// process. MaxMacroDepth bounds the macro calls in progress at once while
// a template renders (a recursive macro), for the same reason, as
// Python's recursion limit bounds Jinja2's.
const (
	MaxTemplateDepth = 256
	MaxMacroDepth    = 1000
)

// macroEnter and macroLeave are the functions preprocessSource calls at
// the start and the end of each macro's body, which count the macro calls
// in progress (see addExtensions).
const (
	macroEnter = "__chat_macro_enter"
	macroLeave = "__chat_macro_leave"
)

// tagWord is the first word of a block tag's body ("macro", "endif").
func tagWord(body string) string {
	body = strings.TrimSpace(body)
	if i := strings.IndexFunc(body, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' }); i >= 0 {
		body = body[:i]
	}
	return body
}

// checkDepth refuses a template nesting blocks or brackets deeper than
// MaxTemplateDepth.
func checkDepth(src string) error {
	blocks := 0
	for _, sg := range scanSegments(strings.ReplaceAll(src, "\r\n", "\n")) {
		if sg.kind != '{' && sg.kind != '%' {
			continue
		}
		if sg.kind == '%' {
			switch w := tagWord(sg.text); {
			case w == "if" || w == "for" || w == "macro" || w == "call" || w == "filter" ||
				w == "block" || w == "with" || w == "generation" ||
				w == "set" && !strings.Contains(sg.text, "="):
				if blocks++; blocks > MaxTemplateDepth {
					return fmt.Errorf("blocks nest deeper than %d", MaxTemplateDepth)
				}
			case strings.HasPrefix(w, "end"):
				blocks = max(blocks-1, 0)
			}
		}
		depth := 0
		var quote byte
		for i := 0; i < len(sg.text); i++ {
			c := sg.text[i]
			switch {
			case quote != 0:
				if c == '\\' {
					i++
				} else if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '(' || c == '[' || c == '{':
				if depth++; depth > MaxTemplateDepth {
					return fmt.Errorf("brackets nest deeper than %d in one tag", MaxTemplateDepth)
				}
			case c == ')' || c == ']' || c == '}':
				depth = max(depth-1, 0)
			}
		}
	}
	return nil
}

const segTextKind = 0

// segment is a run of template text or one tag.
type segment struct {
	kind                 byte // segTextKind, '{', '%' or '#'
	text                 string
	pos                  int // offset in the source
	trimLeft, plusLeft   bool
	trimRight, plusRight bool
}

// scanSegments splits a template into text and tags. An unterminated tag
// is kept as text, for the engine to report.
func scanSegments(src string) []segment {
	var segs []segment
	textStart := 0
	i := 0
	flush := func(end int) {
		if end > textStart {
			segs = append(segs, segment{kind: segTextKind, text: src[textStart:end], pos: textStart})
		}
	}
	for i+1 < len(src) {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		kind := src[i+1]
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		j := i + 2
		sg := segment{kind: kind, pos: i}
		if j < len(src) && src[j] == '-' {
			sg.trimLeft = true
			j++
		} else if j < len(src) && src[j] == '+' {
			sg.plusLeft = true
			j++
		}
		bodyStart := j
		end := -1
		var quote byte
		for j < len(src) {
			c := src[j]
			if kind != '#' && quote != 0 {
				if c == '\\' {
					j += 2
					continue
				}
				if c == quote {
					quote = 0
				}
				j++
				continue
			}
			if kind != '#' && (c == '\'' || c == '"') {
				quote = c
				j++
				continue
			}
			if strings.HasPrefix(src[j:], closer) {
				end = j
				break
			}
			j++
		}
		if end < 0 {
			break
		}
		bodyEnd := end
		if bodyEnd > bodyStart && src[bodyEnd-1] == '-' {
			sg.trimRight = true
			bodyEnd--
		} else if bodyEnd > bodyStart && src[bodyEnd-1] == '+' {
			sg.plusRight = true
			bodyEnd--
		}
		sg.text = src[bodyStart:bodyEnd]
		flush(i)
		i = end + 2
		textStart = i
		if kind == '%' && strings.TrimSpace(sg.text) == "raw" {
			// Everything up to {% endraw %} is text.
			k := i
			for {
				o := strings.Index(src[k:], "{%")
				if o < 0 {
					break
				}
				k += o
				c := strings.Index(src[k+2:], "%}")
				if c < 0 {
					break
				}
				inner := strings.Trim(src[k+2:k+2+c], "-+ \t\r\n")
				if inner == "endraw" {
					segs = append(segs, sg)
					segs = append(segs, segment{kind: segTextKind, text: src[i:k], pos: i})
					endTag := segment{kind: '#', pos: k}
					endBody := src[k+2 : k+2+c]
					endTag.trimLeft = strings.HasPrefix(endBody, "-")
					endTag.trimRight = strings.HasSuffix(endBody, "-")
					segs = append(segs, endTag)
					i = k + 2 + c + 2
					textStart = i
					sg.kind = '#' // the raw tag itself renders nothing
					segs[len(segs)-3].kind = '#'
					break
				}
				k += 2 + c + 2
			}
			if sg.kind == '#' {
				continue
			}
		}
		segs = append(segs, sg)
	}
	textStart = min(textStart, len(src))
	if textStart < len(src) {
		segs = append(segs, segment{kind: segTextKind, text: src[textStart:], pos: textStart})
	}
	return segs
}

// renameFilters renames filter applications of overriddenFilters in a tag
// body, outside string literals.
func renameFilters(body string) string {
	var out strings.Builder
	var quote byte
	for i := 0; i < len(body); i++ {
		c := body[i]
		if quote != 0 {
			out.WriteByte(c)
			if c == '\\' && i+1 < len(body) {
				i++
				out.WriteByte(body[i])
			} else if c == quote {
				quote = 0
			}
			continue
		}
		if c == '\'' || c == '"' {
			quote = c
			out.WriteByte(c)
			continue
		}
		out.WriteByte(c)
		if c != '|' {
			continue
		}
		j := i + 1
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		k := j
		for k < len(body) && (body[k] == '_' || isAlnum(body[k])) {
			k++
		}
		out.WriteString(body[i+1 : j])
		if overriddenFilters[body[j:k]] {
			out.WriteString(filterPrefix)
		}
		out.WriteString(body[j:k])
		i = k - 1
	}
	return out.String()
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

type jinjaFunc = func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error)

// addExtensions adds the globals and filters the engine lacks or renders
// differently from Jinja2 as transformers configures it. Variables the
// caller set are kept.
func addExtensions(vars map[string]jinja.Value, now time.Time) {
	set := func(name string, fn jinjaFunc) {
		if _, ok := vars[name]; !ok {
			vars[name] = jinja.NewCallable(name, fn)
		}
	}
	set("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := ""
		if len(args) > 0 {
			msg = pyStr(args[0])
		}
		return jinja.Undefined(), &TemplateError{Message: msg}
	})
	// The macro calls in progress, counted by the calls preprocessSource
	// puts in each macro's body: a recursion deeper than MaxMacroDepth
	// ends the render with an error instead of overflowing the stack.
	depth := 0
	vars[macroEnter] = jinja.NewCallable(macroEnter, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		if depth++; depth > MaxMacroDepth {
			return jinja.Undefined(), fmt.Errorf("macros call one another more than %d deep", MaxMacroDepth)
		}
		return jinja.NewString(""), nil
	})
	vars[macroLeave] = jinja.NewCallable(macroLeave, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		depth = max(depth-1, 0)
		return jinja.NewString(""), nil
	})
	set("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 {
			format = pyStr(args[0])
		}
		return jinja.NewString(strftime(now, format)), nil
	})
	// range builds its whole list: range(2000000000) took the process's
	// memory. This one refuses more than MaxRangeItems, and computes the
	// count without overflowing.
	set("range", boundedRange)
	set(filterPrefix+"tojson", filterToJSON)
	// Today's date, as llama.cpp gives every template (Llama 3.x reads
	// date_string, FireFunction datetime); Extra may override them.
	for name, format := range map[string]string{"datetime": "%b %d %Y", "date_string": "%d %b %Y"} {
		if _, ok := vars[name]; !ok {
			vars[name] = jinja.NewString(strftime(now, format))
		}
	}
}

// pyStr is str(v) for the values templates print.
func pyStr(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}

// filterToJSON is Jinja2's tojson as transformers defines it:
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=False), with Python's spacing.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: missing value")
	}
	indent := -1
	var ind jinja.Value
	if v, ok := kwargs["indent"]; ok {
		ind = v
	} else if len(args) > 1 {
		ind = args[1]
	}
	switch {
	case ind.IsInt():
		indent = int(ind.AsInt())
	case ind.IsString():
		indent = -2 // handled below through indentStr
	}
	indentStr := ""
	if indent >= 0 {
		indentStr = strings.Repeat(" ", indent)
	} else if indent == -2 {
		indentStr = ind.AsString()
	}
	pretty := indent != -1
	itemSep, keySep := ", ", ": "
	if pretty {
		itemSep = ","
	}
	if seps, ok := kwargs["separators"]; ok && seps.IsList() && seps.AsList().Len() == 2 {
		itemSep = pyStr(seps.AsList().Get(0))
		keySep = pyStr(seps.AsList().Get(1))
	}
	var sb strings.Builder
	if err := writeJSON(&sb, args[0], pretty, indentStr, itemSep, keySep, 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(sb.String()), nil
}

func writeJSON(sb *strings.Builder, v jinja.Value, pretty bool, indent, itemSep, keySep string, depth int) error {
	newline := func(d int) {
		if pretty {
			sb.WriteByte('\n')
			for range d {
				sb.WriteString(indent)
			}
		}
	}
	switch {
	case v.IsUndefined(), v.IsNone():
		sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case v.IsInt():
		fmt.Fprintf(sb, "%d", v.AsInt())
	case v.IsFloat():
		sb.WriteString(pyFloat(v.AsFloat()))
	case v.IsString():
		writeJSONString(sb, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				sb.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := writeJSON(sb, it, pretty, indent, itemSep, keySep, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		if d.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		sb.WriteByte('{')
		for i, k := range d.OrderedKeys() {
			if i > 0 {
				sb.WriteString(itemSep)
			}
			newline(depth + 1)
			writeJSONString(sb, k)
			sb.WriteString(keySep)
			val, _ := d.Get(k)
			if err := writeJSON(sb, val, pretty, indent, itemSep, keySep, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		sb.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot serialize %s", v.String())
	}
	return nil
}

// writeJSONString writes s as json.dumps(s, ensure_ascii=False) does:
// only quotes, backslashes and control characters are escaped.
func writeJSONString(sb *strings.Builder, s string) { jsonesc.String(sb, s) }

// pyFloat formats a float as Python's repr does.
func pyFloat(f float64) string {
	switch {
	case f != f:
		return "NaN"
	case f > 1.7976931348623157e308:
		return "Infinity"
	case f < -1.7976931348623157e308:
		return "-Infinity"
	}
	s := strconvFloat(f)
	return s
}

// strconvFloat is Python's float repr: the shortest round-tripping digits,
// in positional form for exponents in [-4, 16), else in exponent form.
func strconvFloat(f float64) string {
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s = strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// strftime formats t as Python's time.strftime does for the directives
// chat templates use.
func strftime(t time.Time, format string) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&sb, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&sb, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&sb, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&sb, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&sb, "%2d", t.Day())
		case '-':
			// GNU extension: %-d, %-m, %-H ... without padding.
			if i+1 < len(format) {
				i++
				switch format[i] {
				case 'd':
					fmt.Fprintf(&sb, "%d", t.Day())
				case 'm':
					fmt.Fprintf(&sb, "%d", int(t.Month()))
				case 'H':
					fmt.Fprintf(&sb, "%d", t.Hour())
				case 'I':
					fmt.Fprintf(&sb, "%d", hour12(t))
				case 'M':
					fmt.Fprintf(&sb, "%d", t.Minute())
				case 'S':
					fmt.Fprintf(&sb, "%d", t.Second())
				case 'j':
					fmt.Fprintf(&sb, "%d", t.YearDay())
				default:
					sb.WriteString("%-")
					sb.WriteByte(format[i])
				}
			}
		case 'H':
			fmt.Fprintf(&sb, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&sb, "%02d", hour12(t))
		case 'M':
			fmt.Fprintf(&sb, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&sb, "%02d", t.Second())
		case 'f':
			fmt.Fprintf(&sb, "%06d", t.Nanosecond()/1000)
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'B':
			sb.WriteString(t.Month().String())
		case 'b', 'h':
			sb.WriteString(t.Month().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'w':
			fmt.Fprintf(&sb, "%d", int(t.Weekday()))
		case 'j':
			fmt.Fprintf(&sb, "%03d", t.YearDay())
		case 'Z':
			name, _ := t.Zone()
			sb.WriteString(name)
		case 'z':
			sb.WriteString(t.Format("-0700"))
		case 'F':
			sb.WriteString(t.Format("2006-01-02"))
		case 'T':
			sb.WriteString(t.Format("15:04:05"))
		case 'D':
			sb.WriteString(t.Format("01/02/06"))
		case '%':
			sb.WriteByte('%')
		default:
			sb.WriteByte('%')
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}

func hour12(t time.Time) int {
	h := t.Hour() % 12
	if h == 0 {
		h = 12
	}
	return h
}

// Caps reports what the template supports. It renders probe conversations
// once (like llama.cpp's capability check) and remembers the answer.
func (t *Template) Caps() TemplateCaps {
	t.capsOnce.Do(func() { t.caps = t.detectCaps() })
	return t.caps
}

const (
	probeString   = "PROBE_STRING_MARKER"
	probeSystem   = "PROBE_SYSTEM_MARKER"
	probeToolDef  = "probe_tool_definition"
	probeCall1    = "probe_tool_call_one"
	probeCall2    = "probe_tool_call_two"
	probeResponse = "PROBE_TOOL_RESPONSE_MARKER"
	probeArg      = "PROBE_ARG_MARKER"
)

// probe renders messages as given, without Render's adaptations.
func (t *Template) probe(msgs []Message, tools []Tool, mode contentMode, extra map[string]jinja.Value) (string, bool) {
	messages, err := messagesValue(msgs, mode)
	if err != nil {
		return "", false
	}
	toolsVal, err := toolsValue(tools)
	if err != nil {
		return "", false
	}
	vars := map[string]jinja.Value{
		"messages":              messages,
		"tools":                 toolsVal,
		"add_generation_prompt": jinja.NewBool(true),
		"bos_token":             jinja.NewString(""),
		"eos_token":             jinja.NewString(""),
	}
	for k, v := range extra {
		vars[k] = v
	}
	out, err := t.render(vars, time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC))
	return out, err == nil
}

func (t *Template) detectCaps() TemplateCaps {
	var c TemplateCaps

	mode := contentAsGiven
	user := []Message{{Role: RoleUser, Content: probeString}}
	if out, ok := t.probe(user, nil, contentAsGiven, nil); !ok || !strings.Contains(out, probeString) {
		if out, ok := t.probe(user, nil, contentTyped, nil); ok && strings.Contains(out, probeString) {
			c.RequiresTypedContent = true
			mode = contentTyped
		}
	}

	sys := []Message{{Role: RoleSystem, Content: probeSystem}, {Role: RoleUser, Content: "User message"}}
	if out, ok := t.probe(sys, nil, mode, nil); ok && strings.Contains(out, probeSystem) {
		c.SupportsSystemRole = true
	}

	tools := []Tool{{
		Name:        probeToolDef,
		Description: "Tool description",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}}, "required": ["arg"]}`),
	}}
	conv := func(calls ...string) []Message {
		var tc []ToolCall
		for i, name := range calls {
			tc = append(tc, ToolCall{ID: fmt.Sprintf("call0000%d", i+1), Name: name, Arguments: `{"arg": "` + probeArg + `"}`})
		}
		return []Message{
			{Role: RoleUser, Content: "User message"},
			{Role: RoleAssistant, ToolCalls: tc},
			{Role: RoleTool, Content: probeResponse, ToolCallID: "call00001"},
			{Role: RoleAssistant, Content: "The tool response was 'tool response'"},
			{Role: RoleUser, Content: "User message"},
		}
	}
	// Arguments as an object first, as llama.cpp probes: kept when the
	// template shows them other than as a printed Python dict.
	out, ok := t.probe(conv(probeCall1), tools, mode, nil)
	if ok && strings.Contains(out, probeArg) && !strings.Contains(out, "{'arg': '"+probeArg+"'}") {
		c.SupportsObjectArguments = true
	} else {
		mode |= argsAsText
		out, ok = t.probe(conv(probeCall1), tools, mode, nil)
	}
	if ok {
		c.SupportsTools = strings.Contains(out, probeToolDef)
		c.SupportsToolCalls = strings.Contains(out, probeCall1)
		c.SupportsToolResponses = strings.Contains(out, probeResponse)
	}
	if c.SupportsToolCalls {
		if out, ok := t.probe(conv(probeCall1, probeCall2), tools, mode, nil); ok {
			c.SupportsParallelToolCalls = strings.Contains(out, probeCall2)
		}
	}

	on, okOn := t.probe(user, nil, mode, map[string]jinja.Value{"enable_thinking": jinja.NewBool(true)})
	off, okOff := t.probe(user, nil, mode, map[string]jinja.Value{"enable_thinking": jinja.NewBool(false)})
	c.SupportsThinking = okOn && okOff && on != off
	if c.SupportsThinking {
		after := func(s string) string { return s[strings.LastIndex(s, probeString)+len(probeString):] }
		c.ThinkingByDefault = strings.Contains(on, probeString) && strings.Contains(off, probeString) && after(on) != after(off)
	}

	const probeReasoning = "<REASONING_CONTENT_PLACEHOLDER>"
	history := []Message{
		{Role: RoleUser, Content: "User message"},
		{Role: RoleAssistant, Content: "Assistant message", ReasoningContent: probeReasoning},
		{Role: RoleUser, Content: "User message"},
		{Role: RoleAssistant, Content: "Assistant message", ReasoningContent: "Reasoning content"},
		{Role: RoleUser, Content: "User message"},
	}
	keep := map[string]jinja.Value{
		"enable_thinking": jinja.NewBool(true), "preserve_thinking": jinja.NewBool(true),
		"clear_thinking": jinja.NewBool(false), "truncate_history_thinking": jinja.NewBool(false),
		"drop_thinking": jinja.NewBool(false),
	}
	if out, ok := t.probe(history, nil, mode, keep); ok && strings.Contains(out, probeReasoning) {
		c.SupportsPreserveReasoning = true
	}

	effort := func(level string) (string, bool) {
		vars := map[string]jinja.Value{"enable_thinking": jinja.NewBool(true)}
		if level != "" {
			vars["reasoning_effort"] = jinja.NewString(level)
			vars["reasoning_strength"] = jinja.NewString(level)
		}
		return t.probe(user, nil, mode, vars)
	}
	unset, okUnset := effort("")
	// The levels templates tell apart: some read only "none" (thinking
	// off) or "max".
	for _, level := range []string{"none", "low", "medium", "high", "max"} {
		if out, ok := effort(level); ok != okUnset || out != unset {
			c.SupportsReasoningEffort = true
		}
	}
	return c
}

// rawBlock matches a Jinja raw block, whose text is not parsed.
var rawBlock = regexp.MustCompile(`(?s)\{%[-+]?\s*raw\s*[-+]?%\}.*?\{%[-+]?\s*endraw\s*[-+]?%\}`)

// checkDelimiters refuses a template with a tag, an expression or a
// comment that is never closed ("{{ messages[0].content" with no "}}"):
// the Jinja parser takes the rest as text, and the template would render
// its own source as the prompt; llama.cpp's parser refuses it.
func checkDelimiters(src string) error {
	src = rawBlock.ReplaceAllString(src, "")
	for i := 0; i+1 < len(src); i++ {
		if src[i] != '{' {
			continue
		}
		var end string
		switch src[i+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			end = "#}"
		default:
			continue
		}
		j := strings.Index(src[i+2:], end)
		if j < 0 {
			line := strings.Count(src[:i], "\n") + 1
			return fmt.Errorf("line %d: %q is never closed with %q", line, src[i:i+2], end)
		}
		i += 2 + j + 1
	}
	return nil
}
