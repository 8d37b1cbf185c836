package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/airlockrun/airlock/internal/kube/node"
	"github.com/airlockrun/airlock/test/bench/stats"
)

// stages times, from a watch of the tenant's Pods, where a front create's time goes: from the
// Pod's creation to its binding (the scheduler), to its sandbox's ID in its status (the node
// made the sandbox and wrote the status), each as this process sees the watch events.
type stages struct {
	mu                sync.Mutex
	on                bool
	added             map[string]time.Time
	bound, made       map[string]time.Time
	toBound, toStatus []time.Duration
}

func watchStages(ctx context.Context, cs kubernetes.Interface, ns string) (*stages, error) {
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watch the bench's Pods: %w", err)
	}
	s := &stages{added: map[string]time.Time{}, bound: map[string]time.Time{}, made: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			s.mu.Lock()
			if s.on {
				s.observe(p, now)
			}
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// observe records the first time pod is seen, bound, and with its sandbox's ID. s.mu is held.
func (s *stages) observe(p *corev1.Pod, now time.Time) {
	k := string(p.UID)
	t0, seen := s.added[k]
	if !seen {
		s.added[k], t0 = now, now
	}
	if _, ok := s.bound[k]; !ok && p.Spec.NodeName != "" {
		s.bound[k] = now
		s.toBound = append(s.toBound, now.Sub(t0))
	}
	if _, ok := s.made[k]; !ok {
		for _, c := range p.Status.ContainerStatuses {
			if strings.HasPrefix(c.ContainerID, node.ContainerIDPrefix) && c.State.Running != nil {
				s.made[k] = now
				s.toStatus = append(s.toStatus, now.Sub(s.bound[k]))
			}
		}
	}
}

func (s *stages) start() { s.mu.Lock(); s.on = true; s.mu.Unlock() }
func (s *stages) stop()  { s.mu.Lock(); s.on = false; s.mu.Unlock() }

func (s *stages) summary() []result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []result{
		{Name: "  of which Pod created → bound", Summary: stats.Summarize(s.toBound), N: len(s.toBound)},
		{Name: "  of which bound → Running with its sandbox", Summary: stats.Summarize(s.toStatus), N: len(s.toStatus)},
	}
}
