package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ServerCPU is the CPU-seconds (user + system) this process's kube-apiserver
// and etcd children (the control plane Start started) have used so far (Linux;
// 0 elsewhere): the scale harnesses' measure of what the API server spent.
func ServerCPU() float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	total := 0.0
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime(14) stime(15): comm may hold spaces.
		s := string(b)
		open, shut := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || shut < open {
			continue
		}
		comm, rest := s[open+1:shut], strings.Fields(s[shut+1:])
		if (comm != "kube-apiserver" && comm != "etcd") || len(rest) < 13 || rest[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		ut, _ := strconv.ParseFloat(rest[11], 64)
		st, _ := strconv.ParseFloat(rest[12], 64)
		total += (ut + st) / 100 // USER_HZ
	}
	return total
}
