package cli

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestZapLevel(t *testing.T) {
	flag := zapcore.WarnLevel
	for in, want := range map[int]zapcore.Level{0: flag, 1: zapcore.InfoLevel, 2: zapcore.DebugLevel, 3: zapcore.Level(-2), 9: flag} {
		if got := zapLevel(in, flag); got != want {
			t.Errorf("zapLevel(%d) = %v, want %v", in, got, want)
		}
	}
}
