package collabproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stats are a process's figures as the kernel keeps them.
type Stats struct {
	// RSS is the resident memory now (VmRSS), in bytes.
	RSS int64
	// PeakRSS is the highest RSS since the process started or since ResetPeak (VmHWM).
	PeakRSS int64
	// CPU is the user and system time the process has used (utime + stime).
	CPU time.Duration
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go runs on (the kernel converts to it whatever its internal HZ).
const clockTicks = 100

// ReadStats reads the figures of process pid from /proc.
func ReadStats(pid int) (Stats, error) {
	var st Stats
	status, err := os.ReadFile("/proc/" + pidString(pid) + "/status")
	if err != nil {
		return st, fmt.Errorf("collabproc: %w", err)
	}
	if st.RSS, err = statusBytes(status, "VmRSS:"); err != nil {
		return st, err
	}
	if st.PeakRSS, err = statusBytes(status, "VmHWM:"); err != nil {
		return st, err
	}
	stat, err := os.ReadFile("/proc/" + pidString(pid) + "/stat")
	if err != nil {
		return st, fmt.Errorf("collabproc: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields are counted
	// after its closing one, where field 3 (state) is the first.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return st, fmt.Errorf("collabproc: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return st, fmt.Errorf("collabproc: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime (14) and stime (15)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return st, fmt.Errorf("collabproc: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	st.CPU = time.Duration(ticks) * time.Second / clockTicks
	return st, nil
}

// statusBytes reads a "Name:   1234 kB" line of /proc/<pid>/status.
func statusBytes(status []byte, name string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		v, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("collabproc: status line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("collabproc: status line %q: %w", line, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("collabproc: no %s in the process's status", name)
}

// Stats reads the server's figures.
func (s *Server) Stats() (Stats, error) { return ReadStats(s.PID) }

// ResetPeak sets the server's PeakRSS back to its RSS now (writing 5 to
// /proc/<pid>/clear_refs), so that a later PeakRSS is the peak of what happened since.
func (s *Server) ResetPeak() error {
	if err := os.WriteFile("/proc/"+pidString(s.PID)+"/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("collabproc: reset the peak RSS: %w", err)
	}
	return nil
}

// pidString is the process id as /proc names it.
func pidString(pid int) string { return strconv.Itoa(pid) }
