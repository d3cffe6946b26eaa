package container

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func frame(stream byte, payload string) []byte {
	h := make([]byte, 8)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func TestDemux(t *testing.T) {
	tests := []struct {
		name             string
		in               []byte
		wantOut, wantErr string
		wantFail         string
	}{
		{name: "both streams in order", in: bytes.Join([][]byte{frame(1, "out1 "), frame(2, "err1"), frame(1, "out2")}, nil),
			wantOut: "out1 out2", wantErr: "err1"},
		{name: "empty stream", in: nil},
		{name: "stdin echo is dropped", in: frame(0, "typed"), wantOut: ""},
		{name: "podman error frame", in: frame(3, "container gone"), wantFail: "container gone"},
		{name: "truncated frame", in: frame(1, "abc")[:9], wantFail: "copy exec stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := demux(bytes.NewReader(tt.in), &out, &errb)
			if tt.wantFail != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantFail) {
					t.Fatalf("err = %v, want %q", err, tt.wantFail)
				}
				return
			}
			if err != nil || out.String() != tt.wantOut || errb.String() != tt.wantErr {
				t.Errorf("out %q err %q (%v)", out.String(), errb.String(), err)
			}
		})
	}
}

func TestLabelFilterIsSorted(t *testing.T) {
	f := labelFilter(map[string]string{"b": "2", "a": "1"})
	if got := strings.Join(f["label"], ","); got != "a=1,b=2" {
		t.Errorf("filter %q", got)
	}
}
