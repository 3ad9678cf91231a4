package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
)

// logFormat is how the server's log lines look: --log-timestamps,
// --log-prefix (the level) and --log-colors (the level colored, on a
// terminal by default).
type logFormat struct {
	noTimestamps, noPrefix bool
	colors                 string // on, off or auto ("" is auto)
}

// newLogHandler makes the log's handler writing to out, a terminal when
// tty is set (which --log-colors auto colors).
func (f logFormat) newLogHandler(out io.Writer, tty bool, level slog.Level) slog.Handler {
	if f.colored(tty) && !f.noPrefix {
		out = &colorLevels{w: out}
	}
	return slog.NewTextHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) > 0 {
			return a
		}
		_, isLevel := a.Value.Any().(slog.Level) // not an attribute of the same name
		if a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime && f.noTimestamps || a.Key == slog.LevelKey && isLevel && f.noPrefix {
			return slog.Attr{}
		}
		return a
	}})
}

// colored says whether the levels are colored, as llama.cpp decides:
// auto colors a terminal unless NO_COLOR is set or TERM is dumb.
func (f logFormat) colored(tty bool) bool {
	switch {
	case isTruthy(f.colors):
		return true
	case isFalsey(f.colors):
		return false
	}
	return tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// isTerminal says whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// colorLevels colors the level of each record slog's text handler writes
// (one record a Write): its value cannot carry escape codes, which the
// handler would quote.
type colorLevels struct{ w io.Writer }

var levelColors = []struct{ level, colored []byte }{
	{[]byte("level=DEBUG"), []byte("level=\x1b[90mDEBUG\x1b[0m")},
	{[]byte("level=INFO"), []byte("level=\x1b[32mINFO\x1b[0m")},
	{[]byte("level=WARN"), []byte("level=\x1b[33mWARN\x1b[0m")},
	{[]byte("level=ERROR"), []byte("level=\x1b[31mERROR\x1b[0m")},
}

func (c *colorLevels) Write(p []byte) (int, error) {
	for _, lc := range levelColors {
		if i := bytes.Index(p, lc.level); i >= 0 && (i == 0 || p[i-1] == ' ') {
			q := make([]byte, 0, len(p)+len(lc.colored)-len(lc.level))
			q = append(append(append(q, p[:i]...), lc.colored...), p[i+len(lc.level):]...)
			if _, err := c.w.Write(q); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.w.Write(p)
}
