package client_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mailsink/mailsink/client"
)

// The example of docs/clients.md: wait for the mail to an address, then read
// its links and codes.
func Example() {
	c := client.New("http://127.0.0.1:8025", os.Getenv("MAILSINK_API_KEY"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	since := time.Now()
	// ... the app under test signs up new-user@example.com ...
	email, err := c.Wait(ctx, client.Filter{Recipient: "new-user@example.com", Since: since})
	if err != nil {
		fmt.Println(err) // context.DeadlineExceeded when no mail came, or a *client.Error
		return
	}
	links, _ := c.Links(ctx, email.ID)
	codes, _ := c.Codes(ctx, email.ID)
	fmt.Println(links, codes)
}
