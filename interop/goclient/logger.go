package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// stderrLogger replaces the Go client's default logger (logrus on stdout): one line per entry on stderr, or
// in the file RMQSPEC_GO_LOG names, at the chosen level and above. stdout stays JSON lines only.
type stderrLogger struct {
	mu    sync.Mutex
	w     io.Writer
	level int
}

var levels = map[string]int{"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3, "fatal": 4}

func newStderrLogger(level, path string) *stderrLogger {
	l := &stderrLogger{w: os.Stderr}
	l.Level(level)
	if path != "" {
		_ = l.OutputPath(path)
	}
	return l
}

func (l *stderrLogger) log(lv int, name, msg string, fields map[string]interface{}) {
	if lv < l.level || (msg == "" && len(fields) == 0) {
		return
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-5s %s", time.Now().Format("15:04:05.000"), name, msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, fields[k])
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, b.String())
}

func (l *stderrLogger) Debug(msg string, f map[string]interface{})   { l.log(0, "DEBUG", msg, f) }
func (l *stderrLogger) Info(msg string, f map[string]interface{})    { l.log(1, "INFO", msg, f) }
func (l *stderrLogger) Warning(msg string, f map[string]interface{}) { l.log(2, "WARN", msg, f) }
func (l *stderrLogger) Error(msg string, f map[string]interface{})   { l.log(3, "ERROR", msg, f) }
func (l *stderrLogger) Fatal(msg string, f map[string]interface{}) {
	l.log(4, "FATAL", msg, f)
	os.Exit(4)
}

func (l *stderrLogger) Level(level string) {
	if v, ok := levels[strings.ToLower(level)]; ok {
		l.level = v
	} else {
		l.level = 1
	}
}

func (l *stderrLogger) OutputPath(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.w = f
	l.mu.Unlock()
	return nil
}
