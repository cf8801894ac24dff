package bench

import (
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	st := Summarise(s)
	if st.N != 100 || st.P50 != 50 || st.P90 != 90 || st.P99 != 99 || st.Min != 1 || st.Max != 100 || st.Mean != 50.5 {
		t.Fatalf("%+v", st)
	}
	if (Summarise(nil) != Stats{}) {
		t.Fatal("empty")
	}
}
