package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descEffects = prometheus.NewDesc("casebook_slack_effects", "Slack effect jobs by kind and disposition: queued (debounce, cooldown, circuit and scheduled removals included), running, retrying, dead (dead letters), quarantined (targets).",
		[]string{"kind", "disposition"}, nil)
	descEffectOldest = prometheus.NewDesc("casebook_slack_effect_oldest_pending_seconds", "Age of the oldest queued or retrying Slack effect job of a kind.",
		[]string{"kind"}, nil)
	descCircuits = prometheus.NewDesc("casebook_slack_circuits_open", "Open Slack circuits: destination (auth, permission, gone), manual (capacity: an operator closes it), installation (uninstalled or token revoked).",
		[]string{"scope"}, nil)
	descCooldowns = prometheus.NewDesc("casebook_slack_cooldowns", "Slack destinations in a shared 429 cooldown.", nil, nil)
	descEffectsUp = prometheus.NewDesc("casebook_slack_effects_scrape_ok", "1 when the Slack effect figures could be read.", nil, nil)
)

// effectsCollector exports the Slack effect runtime's figures on each scrape.
type effectsCollector struct{ a *App }

func (c effectsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEffects, descEffectOldest, descCircuits, descCooldowns, descEffectsUp} {
		ch <- d
	}
}

func (c effectsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kinds, g, err := c.a.Effects.Stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descEffectsUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descEffectsUp, prometheus.GaugeValue, 1)
	for _, k := range kinds {
		for d, n := range map[string]int{"queued": k.Queued, "running": k.Running, "retrying": k.Retrying, "dead": k.Dead, "quarantined": k.Quarantined} {
			ch <- prometheus.MustNewConstMetric(descEffects, prometheus.GaugeValue, float64(n), k.Kind, d)
		}
		ch <- prometheus.MustNewConstMetric(descEffectOldest, prometheus.GaugeValue, k.OldestPending.Seconds(), k.Kind)
	}
	for scope, n := range map[string]int{"destination": g.DestinationCircuitsOpen, "manual": g.ManualCircuitsOpen, "installation": g.InstallationCircuitsOpen} {
		ch <- prometheus.MustNewConstMetric(descCircuits, prometheus.GaugeValue, float64(n), scope)
	}
	ch <- prometheus.MustNewConstMetric(descCooldowns, prometheus.GaugeValue, float64(g.Cooldowns))
}
