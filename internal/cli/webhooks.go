package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// The webhooks verbs manage the tenant's webhooks (AIRLOCK_HOST, AIRLOCK_TOKEN): the daemon
// POSTs the events a webhook selects to its URL, signed with its secret.

// webhookFlags names the flags behind a webhook's fields.
var webhookFlags = map[string]string{"url": "URL", "events": "--event", "secret": "--secret", "description": "--description", "limit": "--limit"}

// webhooksCmd is `airlock webhooks ls|add|inspect|rm|deliveries|test`.
func webhooksCmd(e *env, args []string) int {
	return dispatch(e, "webhooks", args, []subcommand{{"ls", webhooksLs}, {"add", webhooksAdd}, {"inspect", webhooksInspect},
		{"rm", webhooksRm}, {"deliveries", webhooksDeliveries}, {"test", webhooksTest}})
}

// parseWebhookAdd turns `webhooks add`'s command line into a request; code >= 0 means: exit
// with it.
func parseWebhookAdd(r *remote, args []string) (req api.WebhookRequest, asJSON bool, code int) {
	var events listFlag
	r.fs.Var(&events, "event", "an event type (exec.exited), a prefix ending in . (limit.) or * for all; repeatable (default sandbox. and limit.)")
	r.fs.StringVar(&req.Secret, "secret", "", "the signing secret, at least 16 characters (default: generated, and printed once)")
	r.fs.StringVar(&req.Description, "description", "", "what the webhook is for")
	r.fs.BoolVar(&asJSON, "json", false, "print the webhook, with its secret, as JSON")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return req, false, code
	}
	if len(pos) != 1 {
		return req, false, r.usageError("want one URL")
	}
	req.URL = pos[0]
	for _, ev := range events {
		for _, s := range strings.Split(ev, ",") {
			req.Events = append(req.Events, strings.TrimSpace(s))
		}
	}
	return req, asJSON, -1
}

func webhooksAdd(e *env, args []string) int {
	r := newRemote(e, "webhooks add", "URL [--event TYPE]... [--secret S] [--description D] [--json]")
	req, asJSON, code := parseWebhookAdd(r, args)
	if code >= 0 {
		return code
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	w, err := r.c.CreateWebhook(ctx, req)
	if err != nil {
		if ce, ok := errors.AsType[*client.Error](err); ok && strings.HasPrefix(ce.Field, "events[") {
			ce.Field = "events" // the daemon names the entry; the user gave --event
		}
		return r.fail(err, webhookFlags)
	}
	if asJSON {
		printJSON(e.stdout, w)
		return 0
	}
	fmt.Fprintf(e.stdout, "id:     %s\nsecret: %s\n", w.ID, w.Secret)
	fmt.Fprintln(e.stderr, "The secret is shown only now: keep it to verify the deliveries' Airlock-Signature.")
	return 0
}

func webhooksLs(e *env, args []string) int {
	r := newRemote(e, "webhooks ls", "[--json]")
	asJSON := r.fs.Bool("json", false, "print the webhooks as a JSON array")
	if code := r.noArgs(args); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	ws, err := r.c.Webhooks(ctx)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(ws))
		return 0
	}
	writeWebhookTable(e.stdout, ws, time.Now())
	return 0
}

// writeWebhookTable prints webhooks as a table, their ages as of now.
func writeWebhookTable(w io.Writer, ws []api.Webhook, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "WEBHOOK\tURL\tEVENTS\tDELIVERED\tFAILED\tDROPPED\tPENDING\tCREATED")
	for _, h := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", h.ID, h.URL, strings.Join(h.Events, ","), h.Delivered, h.Failed,
			h.Dropped, h.Pending, age(now, h.CreatedAt))
	}
	tw.Flush()
}

func webhooksInspect(e *env, args []string) int {
	return inspect(e, "webhooks inspect", "WEBHOOK_ID", "webhook ID", args, func(c *client.Client, ctx context.Context, id string) (any, error) {
		return c.Webhook(ctx, id)
	})
}

func webhooksRm(e *env, args []string) int {
	return remove(e, "webhooks rm", "[--json] WEBHOOK_ID...", "webhook ID", "print each removed webhook as JSON instead of its ID", args,
		func(c *client.Client, ctx context.Context, id string) (any, error) { return c.DeleteWebhook(ctx, id) })
}

func webhooksDeliveries(e *env, args []string) int {
	r := newRemote(e, "webhooks deliveries", "[--limit N] [--json] WEBHOOK_ID")
	limit := r.fs.Int("limit", 0, "at most this many, newest first (default 100, at most 1000)")
	asJSON := r.fs.Bool("json", false, "print the deliveries as a JSON array")
	id, code := r.oneArg(args, "webhook ID")
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	dls, err := r.c.WebhookDeliveries(ctx, id, *limit)
	if err != nil {
		return r.fail(err, webhookFlags)
	}
	if *asJSON {
		printJSON(e.stdout, orEmpty(dls))
		return 0
	}
	writeDeliveryTable(e.stdout, dls, time.Now())
	return 0
}

// writeDeliveryTable prints deliveries as a table, their ages as of now.
func writeDeliveryTable(w io.Writer, dls []api.WebhookDelivery, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tEVENT\tSTATUS\tATTEMPTS\tHTTP\tTOOK\tCREATED\tERROR")
	for _, d := range dls {
		status := d.Status
		if d.Status == api.DeliveryPending && d.NextAttemptAt != nil {
			status += " (retry in " + age(*d.NextAttemptAt, now) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.EventType, status, d.Attempts, httpStatus(d.ResponseStatus),
			took(d), age(now, d.CreatedAt), dash(d.Error))
	}
	tw.Flush()
}

// httpStatus is a receiver's answer as a table cell.
func httpStatus(s int) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprint(s)
}

// took is a delivery's last attempt's duration as a table cell.
func took(d api.WebhookDelivery) string {
	if d.Attempts == 0 {
		return "-"
	}
	return fmt.Sprintf("%dms", d.DurationMs)
}

// webhooksTest sends a test event; it exits 1 when the receiver did not take it.
func webhooksTest(e *env, args []string) int {
	r := newRemote(e, "webhooks test", "[--json] WEBHOOK_ID")
	asJSON := r.fs.Bool("json", false, "print the delivery as JSON")
	id, code := r.oneArg(args, "webhook ID")
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	d, err := r.c.TestWebhook(ctx, id)
	if err != nil {
		return r.fail(err, nil)
	}
	if *asJSON {
		printJSON(e.stdout, d)
	} else {
		fmt.Fprintln(e.stdout, describeDelivery(d))
	}
	if d.Status != api.DeliveryDelivered {
		return exitError
	}
	return 0
}

// describeDelivery is one line about a delivery's outcome.
func describeDelivery(d api.WebhookDelivery) string {
	s := fmt.Sprintf("%s %s: %s", d.ID, d.EventType, d.Status)
	if d.ResponseStatus != 0 {
		s += fmt.Sprintf(" (HTTP %d, %dms)", d.ResponseStatus, d.DurationMs)
	}
	if d.Error != "" {
		s += ": " + d.Error
	}
	return s
}
