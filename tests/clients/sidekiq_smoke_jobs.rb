# The jobs of sidekiq_smoke.rb, loaded by it (to enqueue them) and by the
# `sidekiq` process it starts (to run them), as an application's are.
require "sidekiq"

# ruby-redis 4.8 warns of a change to come in its 5.0 at every SADD Sidekiq makes.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_client { |config| config.redis = { url: ENV.fetch("REDIS_URL") } }
Sidekiq.configure_server do |config|
  config.redis = { url: ENV.fetch("REDIS_URL") }
  # Look for due scheduled jobs every second, from the start (Sidekiq's
  # default first look comes after 10-15 s).
  config.options[:poll_interval_average] = 1
end

# Records that it ran, in a list the driver reads.
class SmokeJob
  include Sidekiq::Worker
  sidekiq_options queue: "smoke"

  def perform(number, label)
    Sidekiq.redis { |redis| redis.rpush("smoke:done", "#{label}:#{number}") }
  end
end

# Fails every time: after its first failure it waits in the retry set.
class FailingJob
  include Sidekiq::Worker
  sidekiq_options queue: "smoke", retry: 1

  def perform(number)
    Sidekiq.redis { |redis| redis.incr("smoke:failures") }
    raise "deliberate failure #{number}"
  end
end
