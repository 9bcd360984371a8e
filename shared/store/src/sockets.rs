//! Pushes to websocket clients through the WebSocket API's management endpoint.

use async_trait::async_trait;
use converger_ports::{Pushed, SocketError, Sockets};

/// `PostToConnection` through the SDK.
pub struct ApiGatewaySockets {
    client: aws_sdk_apigatewaymanagement::Client,
}

impl ApiGatewaySockets {
    /// A client for the management endpoint at `url`, with the SDK configuration's
    /// credentials, region and timeouts.
    pub fn new(
        config: &aws_config::SdkConfig,
        url: &str,
        interceptors: &[crate::aws::SharedInterceptor],
    ) -> Self {
        let mut conf =
            aws_sdk_apigatewaymanagement::config::Builder::from(config).endpoint_url(url);
        for i in interceptors {
            conf.push_interceptor(i.clone());
        }
        let conf = conf.build();
        Self {
            client: aws_sdk_apigatewaymanagement::Client::from_conf(conf),
        }
    }
}

#[async_trait]
impl Sockets for ApiGatewaySockets {
    async fn post(&self, connection_id: &str, data: &[u8]) -> Result<Pushed, SocketError> {
        let r = self
            .client
            .post_to_connection()
            .connection_id(connection_id)
            .data(aws_sdk_apigatewaymanagement::primitives::Blob::new(
                data.to_vec(),
            ))
            .send()
            .await;
        match r {
            Ok(_) => Ok(Pushed::Sent),
            Err(e) => {
                if e.as_service_error()
                    .is_some_and(|se| se.is_gone_exception())
                {
                    return Ok(Pushed::Gone);
                }
                if e.as_service_error()
                    .is_some_and(|se| se.is_payload_too_large_exception())
                {
                    return Ok(Pushed::TooLarge);
                }
                Err(SocketError {
                    message: aws_sdk_apigatewaymanagement::error::DisplayErrorContext(&e)
                        .to_string(),
                    source: Some(Box::new(e)),
                })
            }
        }
    }

    /// `DeleteConnection`: API Gateway closes the client's socket.
    async fn close(&self, connection_id: &str) -> Result<(), SocketError> {
        match self
            .client
            .delete_connection()
            .connection_id(connection_id)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_gone_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(SocketError {
                message: aws_sdk_apigatewaymanagement::error::DisplayErrorContext(&e).to_string(),
                source: Some(Box::new(e)),
            }),
        }
    }
}
