package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. Linux reports them
// in USER_HZ, which is 100 on every architecture Go supports; reading it
// from sysconf would need cgo.
const userHZ = 100

// ProcSample is what /proc says about a process at one moment.
type ProcSample struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set size (VmRSS); RSSAnon its anonymous part
	// (RssAnon: heap and stacks, without file pages such as the embedded
	// store's memory-mapped file); HWM the peak RSS (VmHWM).
	RSS, RSSAnon, HWM int64
}

// ReadProc reads /proc/PID/stat and /proc/PID/status of pid.
func ReadProc(pid int) (ProcSample, error) {
	var s ProcSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields are counted after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	s.CPU = time.Duration(utime+stime) * time.Second / userHZ

	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &s.RSS
		case "RssAnon":
			dst = &s.RSSAnon
		case "VmHWM":
			dst = &s.HWM
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*dst = kb * 1024
	}
	return s, sc.Err()
}

// MiB formats a byte count in mebibytes.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// SelfCPU returns the user plus system CPU time of this process (the load
// tool), so a report can show what the load itself cost the shared CPUs.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MachineSample is the first line of /proc/stat: CPU time of all CPUs, in
// USER_HZ ticks.
type MachineSample struct {
	Busy, Steal, Total int64
}

// ReadMachine reads /proc/stat. Busy is user, nice, system, irq and softirq
// time; Steal is time the hypervisor gave to other guests; Total adds idle
// and iowait.
func ReadMachine() (MachineSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineSample{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineSample{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var v [8]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return MachineSample{}, fmt.Errorf("/proc/stat: %v", err)
		}
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	s := MachineSample{Busy: user + nice + system + irq + softirq, Steal: steal}
	s.Total = s.Busy + idle + iowait + steal
	return s, nil
}

// BusyShare returns the share of all CPUs' time between a and b that was
// busy, and the share stolen by the hypervisor.
func BusyShare(a, b MachineSample) (busy, steal float64) {
	total := float64(b.Total - a.Total)
	if total <= 0 {
		return 0, 0
	}
	return float64(b.Busy-a.Busy) / total, float64(b.Steal-a.Steal) / total
}

// fdatasync flushes f's data (and the size, for an append) to the disk.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
