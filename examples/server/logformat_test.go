package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLogFormat: --log-timestamps, --log-prefix and --log-colors shape
// the log lines as parsed from the command line.
func TestLogFormat(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		tty         bool
		env         map[string]string
		time, level bool
		color       bool
	}{
		{nil, false, nil, true, true, false},
		{nil, true, nil, true, true, true},
		{nil, true, map[string]string{"NO_COLOR": "1"}, true, true, false},
		{nil, true, map[string]string{"TERM": "dumb"}, true, true, false},
		{[]string{"--log-colors", "off"}, true, nil, true, true, false},
		{[]string{"--log-colors", "on"}, false, nil, true, true, true},
		{[]string{"--no-log-timestamps"}, false, nil, false, true, false},
		{[]string{"--no-log-prefix", "--log-colors", "on"}, false, nil, true, false, false},
		{[]string{"--no-log-timestamps", "--log-timestamps"}, false, nil, true, true, false},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.env["NO_COLOR"])
			t.Setenv("TERM", tt.env["TERM"])
			c, err := parseFlags(tt.args, noEnv, nil)
			require.NoError(t, err)
			var buf bytes.Buffer
			slog.New(c.logFormat.newLogHandler(&buf, tt.tty, slog.LevelInfo)).Warn("model loaded", "level", "user attr")
			line := buf.String()
			assert.Equal(t, tt.time, strings.HasPrefix(line, "time="), line)
			assert.Equal(t, tt.level, strings.Contains(line, "level=WARN") || strings.Contains(line, "level=\x1b[33mWARN\x1b[0m"), line)
			assert.Equal(t, tt.color, strings.Contains(line, "\x1b[33mWARN\x1b[0m"), line)
			assert.Contains(t, line, `msg="model loaded" level="user attr"`, "an attribute named level is left alone")
		})
	}
}
