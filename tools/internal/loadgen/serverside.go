package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// listHistogram is mailsink's request-duration histogram of list requests
// (GET /v1/emails): how many were answered within 1 ms (its le="0.001"
// bucket) and in all, as the server measured them.
type listHistogram struct{ Fast, Total int64 }

// listRoute is the route label of GET /v1/emails in mailsink's metrics.
const listRoute = `route="/v1/emails"`

// scrapeListHistogram reads the list route's le="0.001" bucket and count of
// mailsink_http_request_duration_seconds from the server's /metrics.
func scrapeListHistogram(ctx context.Context, base string) (listHistogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return listHistogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return listHistogram{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return listHistogram{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseListHistogram(resp.Body)
}

// parseListHistogram reads the Prometheus text exposition in r.
func parseListHistogram(r io.Reader) (listHistogram, error) {
	var h listHistogram
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "mailsink_http_request_duration_seconds_") ||
			!strings.Contains(line, listRoute) || !strings.Contains(line, `method="GET"`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return h, fmt.Errorf("/metrics: %q: %v", line, err)
		}
		switch {
		case strings.HasPrefix(line, "mailsink_http_request_duration_seconds_bucket{") && strings.Contains(line, `le="0.001"`):
			h.Fast = int64(v)
		case strings.HasPrefix(line, "mailsink_http_request_duration_seconds_count{"):
			h.Total = int64(v)
		}
	}
	return h, sc.Err()
}

// CmdStat is one command's line of Redis's INFO commandstats: calls and
// the microseconds Redis spent in them.
type CmdStat struct {
	Name  string
	Calls int64
	Usec  int64
}

// redisCommandStats returns INFO commandstats of the server's Redis, or nil.
func (r *Runner) redisCommandStats(ctx context.Context) map[string]CmdStat {
	if r.Server == nil {
		return nil
	}
	info, err := r.Server.RedisInfo(ctx, "commandstats")
	if err != nil || info == nil {
		return nil
	}
	return parseCommandStats(info)
}

// parseCommandStats reads the cmdstat_NAME:calls=N,usec=M,... lines of INFO
// commandstats.
func parseCommandStats(info map[string]string) map[string]CmdStat {
	out := map[string]CmdStat{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		s := CmdStat{Name: name}
		for _, f := range strings.Split(v, ",") {
			key, val, _ := strings.Cut(f, "=")
			switch key {
			case "calls":
				s.Calls, _ = strconv.ParseInt(val, 10, 64)
			case "usec":
				s.Usec, _ = strconv.ParseInt(val, 10, 64)
			}
		}
		out[name] = s
	}
	return out
}

// commandStatsDelta returns the commands called between before and after,
// most time first.
func commandStatsDelta(before, after map[string]CmdStat) []CmdStat {
	var out []CmdStat
	for name, a := range after {
		b := before[name]
		if d := (CmdStat{Name: name, Calls: a.Calls - b.Calls, Usec: a.Usec - b.Usec}); d.Calls > 0 {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Usec != out[j].Usec {
			return out[i].Usec > out[j].Usec
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// CommandStatsText renders a delta per message: calls and Redis's own time
// in each command. usec counts a command's execution, not the event loop's
// reading and writing of sockets, which INFO cpu does; a script's
// (evalsha's) includes the commands it calls, which are also counted under
// their own names.
func CommandStatsText(stats []CmdStat, ops int) string {
	if len(stats) == 0 || ops == 0 {
		return ""
	}
	var parts []string
	for _, s := range stats {
		parts = append(parts, fmt.Sprintf("%s %.2f calls, %s", s.Name, float64(s.Calls)/float64(ops), fmtDur(time.Duration(s.Usec)*time.Microsecond/time.Duration(ops))))
	}
	return "INFO commandstats per message (a script's time includes the commands it calls, also counted under their own names): " + strings.Join(parts, "; ")
}
