package plughost

import (
	"bytes"
	"testing"
)

// FuzzReadFrame: frames from a plugin host are bounded and never panic
// the reader; what is read writes back to the same bytes.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeFrame(&b, opHello, []byte(`{"name":"p","version":"1","description":""}`), []byte(`{"name":"t"}`))
	f.Add(b.Bytes())
	b.Reset()
	writeFrame(&b, opError, []byte("EMSGSIZE"), []byte("too big"))
	f.Add(b.Bytes())
	f.Add([]byte{'R', 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := readFrame(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(fr.parts) > MaxParts {
			t.Fatalf("%d parts", len(fr.parts))
		}
		var out bytes.Buffer
		if err := writeFrame(&out, fr.op, fr.parts...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in[:out.Len()]) {
			t.Fatalf("frame does not round-trip")
		}
	})
}
