package approval

import (
	"fmt"

	"github.com/google/uuid"
)

// NewID returns a fresh request id: a UUIDv7 (RFC 9562) in canonical
// lowercase text form, so ids sort by creation time (millisecond
// precision, then random bits). The error comes from the random source.
func NewID() (ID, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new request id: %w", err)
	}
	return ID(u.String()), nil
}
