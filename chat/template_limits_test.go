package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTemplateDepthLimits: a template that recurses through a macro, or
// nests blocks or brackets without end, used to overflow the goroutine's
// stack in the Jinja engine (fatal error: stack overflow, which no recover
// catches). Such a template is now refused when parsed or fails to render,
// while macros, even recursive ones, within the bounds render as before.
func TestTemplateDepthLimits(t *testing.T) {
	in := TemplateInput{Messages: []Message{{Role: "user", Content: "hi"}}}
	for _, tc := range []struct {
		name      string
		src       string
		parseErr  string
		renderErr string
		want      string
	}{
		{name: "infinite macro recursion", src: `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`,
			renderErr: "more than 1000 deep"},
		{name: "mutual recursion", src: `{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`,
			renderErr: "more than 1000 deep"},
		{name: "bounded recursion", src: "{% macro f(n) -%}\n{% if n > 0 %}{{ n }},{{ f(n-1) }}{% endif %}\n{%- endmacro %}{{ f(3) }}|{{ f(2) }}",
			want: "3,2,1,|2,1,"},
		{name: "macro with caller", src: `{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}x{% endcall %}`,
			want: "[x]"},
		{name: "deep brackets", src: "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}",
			parseErr: "brackets nest deeper"},
		{name: "deep blocks", src: strings.Repeat("{% if true %}", 100000) + "x" + strings.Repeat("{% endif %}", 100000),
			parseErr: "blocks nest deeper"},
		{name: "brackets in strings", src: `{{ "` + strings.Repeat("(", 1000) + `" | length }}`, want: "1000"},
		{name: "many sequential blocks", src: strings.Repeat("{% if true %}y{% endif %}", 1000), want: strings.Repeat("y", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := ParseTemplate(tc.src)
			if tc.parseErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.parseErr)
				return
			}
			require.NoError(t, err)
			out, err := tp.Render(in)
			if tc.renderErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.renderErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, out)
		})
	}
}

// TestExtraValueDepth: an extra variable is converted recursively, so one
// that holds itself overflowed the stack and ended the process; it is an
// error now, as is one nested past the bound, and a plain nested value
// still renders.
func TestExtraValueDepth(t *testing.T) {
	tmpl, err := ParseTemplate("{{ x }}")
	require.NoError(t, err)
	self := map[string]any{}
	self["me"] = self
	list := []any{nil}
	list[0] = list
	deep := any("leaf")
	for range 300 {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		name string
		v    any
		ok   bool
	}{
		{"map holding itself", self, false},
		{"list holding itself", list, false},
		{"300 lists deep", deep, false},
		{"nested map", map[string]any{"a": []any{1, map[string]any{"b": "c"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tmpl.Render(TemplateInput{Extra: map[string]any{"x": tc.v}})
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "nests deeper")
		})
	}
}

// TestTemplateRange: range() builds its list, so range(2000000000) took
// the process's memory; ours refuses lists past MaxRangeItems and gives
// Python's lists otherwise, steps and bounds near int64's ends included.
func TestTemplateRange(t *testing.T) {
	for _, tc := range []struct {
		src, want, err string
	}{
		{"{{ range(4) | list }}", "[0, 1, 2, 3]", ""},
		{"{{ range(2, 5) | list }}", "[2, 3, 4]", ""},
		{"{{ range(10, 0, -3) | list }}", "[10, 7, 4, 1]", ""},
		{"{{ range(0, 5, 2) | list }}", "[0, 2, 4]", ""},
		{"{{ range(-2) | list }}", "[]", ""},
		{"{{ range(3, 3) | list }}", "[]", ""},
		{"{% for i in range(3) %}{{ i }}{% endfor %}", "012", ""},
		{"{{ range(9223372036854775806, 9223372036854775807, 2) | list }}", "[9223372036854775806]", ""},
		{"{{ range(2000000000) | length }}", "", "at most"},
		{"{{ range(-9223372036854775807, 9223372036854775807) | length }}", "", "at most"},
		{"{{ range(1, 2, 0) | list }}", "", "step must not be zero"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.src)
			require.NoError(t, err)
			out, err := tmpl.Render(TemplateInput{})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, out)
		})
	}
}
