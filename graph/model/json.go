package model

import (
	"encoding/json"
	"fmt"
	"io"
)

// JSON is an arbitrary JSON value, passed through as raw bytes.
type JSON json.RawMessage

// MarshalGQL writes the raw JSON.
func (j JSON) MarshalGQL(w io.Writer) {
	if len(j) == 0 {
		io.WriteString(w, "null")
		return
	}
	w.Write(j)
}

// UnmarshalGQL accepts any JSON value.
func (j *JSON) UnmarshalGQL(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("JSON scalar: %w", err)
	}
	*j = b
	return nil
}
