//! A rule of one's own on a stack's bus, feeding a queue: what an integration reading the bus
//! sees (the tests' event tap, the chaos suite's check that every delivery was announced).

use aws_sdk_eventbridge::types::Target;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::Value;

pub struct BusTap {
    sqs: aws_sdk_sqs::Client,
    url: String,
}

fn sqs_err<E: std::error::Error + 'static, R: std::fmt::Debug>(
    e: aws_sdk_sqs::error::SdkError<E, R>,
) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()
}

fn bus_err<E: std::error::Error + 'static, R: std::fmt::Debug>(
    e: aws_sdk_eventbridge::error::SdkError<E, R>,
) -> String {
    aws_sdk_eventbridge::error::DisplayErrorContext(&e).to_string()
}

impl BusTap {
    /// The queue `name`, fed by a rule of the same name on `bus` that matches `pattern`.
    pub async fn start(
        sqs: aws_sdk_sqs::Client,
        events: &aws_sdk_eventbridge::Client,
        bus: &str,
        name: &str,
        pattern: &Value,
    ) -> Result<Self, String> {
        let url = sqs
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .map_err(sqs_err)?
            .queue_url
            .ok_or("no queue url")?;
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(sqs_err)?
            .attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or("no queue arn")?;
        events
            .put_rule()
            .name(name)
            .event_bus_name(bus)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .map_err(bus_err)?;
        events
            .put_targets()
            .rule(name)
            .event_bus_name(bus)
            .targets(
                Target::builder()
                    .id("tap")
                    .arn(arn)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
            .send()
            .await
            .map_err(bus_err)?;
        Ok(Self { sqs, url })
    }

    /// The events that arrived since the last read (a long poll of a second at most); what
    /// was read is deleted.
    pub async fn receive(&self) -> Result<Vec<Value>, String> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .map_err(sqs_err)?;
        let mut events = Vec::new();
        for m in out.messages.unwrap_or_default() {
            events.push(serde_json::from_str(m.body().unwrap_or("{}")).unwrap_or_default());
            if let Some(h) = m.receipt_handle() {
                let _ = self
                    .sqs
                    .delete_message()
                    .queue_url(&self.url)
                    .receipt_handle(h)
                    .send()
                    .await;
            }
        }
        Ok(events)
    }
}
