// codec-bench compresses and decompresses a file with the Go broker's own fragment codecs
// (go.gazette.dev/core/broker/codecs: golang/snappy's buffered writer for SNAPPY, DataDog/zstd
// at its default level for ZSTANDARD), the way the broker's spool does: content is fed to one
// compressor per fragment in batches, then the compressor is closed. bench/codecs.ts runs it
// beside our persister's codecs on the same content.
//
//	codec-bench -in FILE -codec SNAPPY|ZSTANDARD|GZIP [-runs N] [-batch BYTES] [-out FILE]
//
// Prints one JSON object: the codec, the content and compressed sizes, and per run the
// milliseconds (wall and CPU) to compress (all in memory) and to decompress what was compressed. -out also
// writes the compressed bytes, so that the other side can decode them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"go.gazette.dev/core/broker/codecs"
	pb "go.gazette.dev/core/broker/protocol"
)

type result struct {
	Codec         string    `json:"codec"`
	Content       int       `json:"content"`
	Compressed    int       `json:"compressed"`
	CompressMs    []float64 `json:"compressMs"`
	DecompressMs  []float64 `json:"decompressMs"`
	CompressCPU   []float64 `json:"compressCpuMs"`
	DecompressCPU []float64 `json:"decompressCpuMs"`
}

// cpuMs is the CPU time (user + system) of this process so far, all threads: on a loaded
// machine it varies far less than wall time.
func cpuMs() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

func main() {
	in := flag.String("in", "", "content file")
	codecName := flag.String("codec", "ZSTANDARD", "SNAPPY, ZSTANDARD or GZIP")
	runs := flag.Int("runs", 3, "runs")
	batch := flag.Int("batch", 1<<20, "bytes per compressor write (the spool compresses in 1 MiB batches)")
	out := flag.String("out", "", "where to write the compressed bytes")
	flag.Parse()

	content, err := os.ReadFile(*in)
	if err != nil {
		fail(err)
	}
	codec, ok := pb.CompressionCodec_value[*codecName]
	if !ok {
		fail(fmt.Errorf("unknown codec %q", *codecName))
	}
	r := result{Codec: *codecName, Content: len(content)}
	var compressed []byte
	for i := 0; i < *runs; i++ {
		var buf bytes.Buffer
		buf.Grow(len(content))
		cpu := cpuMs()
		start := time.Now()
		w, err := codecs.NewCodecWriter(&buf, pb.CompressionCodec(codec))
		if err != nil {
			fail(err)
		}
		for at := 0; at < len(content); at += *batch {
			end := at + *batch
			if end > len(content) {
				end = len(content)
			}
			if _, err := w.Write(content[at:end]); err != nil {
				fail(err)
			}
		}
		if err := w.Close(); err != nil {
			fail(err)
		}
		r.CompressMs = append(r.CompressMs, ms(time.Since(start)))
		r.CompressCPU = append(r.CompressCPU, cpuMs()-cpu)
		compressed = buf.Bytes()
	}
	r.Compressed = len(compressed)
	for i := 0; i < *runs; i++ {
		cpu := cpuMs()
		start := time.Now()
		rd, err := codecs.NewCodecReader(bytes.NewReader(compressed), pb.CompressionCodec(codec))
		if err != nil {
			fail(err)
		}
		n, err := io.Copy(io.Discard, rd)
		if err != nil {
			fail(err)
		}
		_ = rd.Close()
		if int(n) != len(content) {
			fail(fmt.Errorf("decompressed %d bytes, want %d", n, len(content)))
		}
		r.DecompressMs = append(r.DecompressMs, ms(time.Since(start)))
		r.DecompressCPU = append(r.DecompressCPU, cpuMs()-cpu)
	}
	if *out != "" {
		if err := os.WriteFile(*out, compressed, 0o644); err != nil {
			fail(err)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "codec-bench:", err)
	os.Exit(1)
}
