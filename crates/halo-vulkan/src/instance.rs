//! The Vulkan instance: the loaded library, the `VkInstance`, and the validation messages it
//! reports.

use crate::status::VkResultExt;
use ash::{ext, khr, vk};
use halo_hal::{Error, Result};
use std::ffi::{c_void, CStr};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The Khronos validation layer.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// How the driver checks its own use of Vulkan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validation {
    /// No validation layer: what users run.
    #[default]
    Off,
    /// The Khronos validation layer; its warnings and errors are printed to stderr.
    Report,
    /// The Khronos validation layer; any warning or error it reports fails the device's next
    /// queue operation or wait (and dropping a device with unreported messages panics). For tests.
    Strict,
}

impl Validation {
    /// Reads `HALO_VULKAN_VALIDATION` (`off`, `report`, `strict`); unset means [`Validation::Off`].
    pub fn from_env() -> Result<Self> {
        match std::env::var("HALO_VULKAN_VALIDATION").as_deref() {
            Err(_) | Ok("") | Ok("off") | Ok("0") => Ok(Validation::Off),
            Ok("report") | Ok("1") => Ok(Validation::Report),
            Ok("strict") => Ok(Validation::Strict),
            Ok(other) => Err(Error::invalid_argument(format!(
                "HALO_VULKAN_VALIDATION='{other}' is not one of off, report, strict"
            ))),
        }
    }
}

/// Validation messages not yet reported.
pub(crate) struct MessageLog {
    strict: bool,
    messages: Mutex<Vec<String>>,
}

impl MessageLog {
    fn record(&self, severity: vk::DebugUtilsMessageSeverityFlagsEXT, message: String) {
        // Not `eprintln!`: it panics when stderr is closed, and this runs inside a Vulkan call.
        let _ = writeln!(std::io::stderr(), "vulkan validation ({severity:?}): {message}");
        if self.strict {
            self.messages.lock().unwrap_or_else(|p| p.into_inner()).push(message);
        }
    }

    /// Fails with every message reported since the last check (strict validation only).
    pub(crate) fn check(&self) -> Result<()> {
        let mut messages = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        if messages.is_empty() {
            return Ok(());
        }
        let all = std::mem::take(&mut *messages).join("\n");
        Err(Error::internal(format!("the Vulkan validation layer reported:\n{all}")))
    }
}

/// A `VkInstance` and the library it came from.
///
/// Ownership: devices hold an `Arc` of it, so it is destroyed after the last of them.
pub(crate) struct Instance {
    pub(crate) entry: ash::Entry,
    pub(crate) raw: ash::Instance,
    messenger: Option<(ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Boxed so the messenger's user-data pointer stays valid as the instance moves.
    pub(crate) messages: Box<MessageLog>,
}

impl Instance {
    /// Loads the Vulkan library and creates an instance.
    ///
    /// # Errors
    /// `Unavailable` when no Vulkan loader is installed or it has no Vulkan 1.2 instance;
    /// `FailedPrecondition` when validation is asked for and the layer is not installed.
    pub(crate) fn new(validation: Validation) -> Result<Arc<Self>> {
        // SAFETY: loading the system's Vulkan loader runs its initialisers; it is the library
        // this driver exists to use, looked up by its standard name.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| Error::unavailable(format!("no Vulkan loader on this machine: {e}")))?;
        // SAFETY: a global command with no arguments, on a loaded entry.
        let version = unsafe { entry.try_enumerate_instance_version() }
            .or_vk("vkEnumerateInstanceVersion")?
            .unwrap_or(vk::API_VERSION_1_0);
        if version < vk::API_VERSION_1_2 {
            return Err(Error::unavailable(format!(
                "the Vulkan loader supports {}.{}; halo needs Vulkan 1.2",
                vk::api_version_major(version),
                vk::api_version_minor(version)
            )));
        }
        let validate = validation != Validation::Off;
        let mut layers = Vec::new();
        let mut extensions = Vec::new();
        if validate {
            // SAFETY: a global query with no arguments.
            let available =
                unsafe { entry.enumerate_instance_layer_properties() }.or_vk("vkEnumerateInstanceLayerProperties")?;
            if !available
                .iter()
                .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER))
            {
                return Err(Error::failed_precondition(
                    "Vulkan validation was asked for but VK_LAYER_KHRONOS_validation is not installed \
                     (Debian: apt-get install vulkan-validationlayers)",
                ));
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ext::debug_utils::NAME.as_ptr());
        }
        // SAFETY: a global query; no layer is named.
        let available = unsafe { entry.enumerate_instance_extension_properties(None) }
            .or_vk("vkEnumerateInstanceExtensionProperties")?;
        let portability =
            offers_portability_enumeration(available.iter().filter_map(|e| e.extension_name_as_c_str().ok()));
        let mut flags = vk::InstanceCreateFlags::empty();
        if portability {
            extensions.push(khr::portability_enumeration::NAME.as_ptr());
            flags |= vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR;
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"halo")
            .engine_name(c"halo")
            .api_version(vk::API_VERSION_1_2);
        let info = vk::InstanceCreateInfo::default()
            .flags(flags)
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        // SAFETY: `info` and everything it points to live until the call returns.
        let raw = unsafe { entry.create_instance(&info, None) }.or_vk("vkCreateInstance")?;
        let messages = Box::new(MessageLog {
            strict: validation == Validation::Strict,
            messages: Mutex::new(Vec::new()),
        });
        let mut instance = Instance {
            entry,
            raw,
            messenger: None,
            messages,
        };
        if validate {
            instance.messenger = Some(instance.create_messenger()?);
        }
        Ok(Arc::new(instance))
    }

    fn create_messenger(&self) -> Result<(ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)> {
        let loader = ext::debug_utils::Instance::new(&self.entry, &self.raw);
        let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE
                    | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
            )
            .pfn_user_callback(Some(on_message))
            .user_data(&*self.messages as *const MessageLog as *mut c_void);
        // SAFETY: the user data points into `self.messages`, a box that lives until the
        // messenger is destroyed in `drop` (before the box is freed).
        let messenger =
            unsafe { loader.create_debug_utils_messenger(&info, None) }.or_vk("vkCreateDebugUtilsMessengerEXT")?;
        Ok((loader, messenger))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device of this instance holds an `Arc` of it, so none is left; the
        // messenger and instance are destroyed once, children first.
        unsafe {
            if let Some((loader, messenger)) = self.messenger.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            self.raw.destroy_instance(None);
        }
    }
}

/// Receives the validation layer's messages; never unwinds into Vulkan.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user` is the `MessageLog` registered in `create_messenger`, alive while the
    // messenger exists; `data` is null or valid for this call, and its message is null or a C
    // string, as the debug-utils extension specifies.
    let (log, message) = unsafe {
        let log = &*(user as *const MessageLog);
        let message = data
            .as_ref()
            .filter(|d| !d.p_message.is_null())
            .map(|d| CStr::from_ptr(d.p_message).to_string_lossy().into_owned())
            .unwrap_or_default();
        (log, message)
    };
    log.record(severity, message);
    vk::FALSE
}

/// Whether the loader offers `VK_KHR_portability_enumeration`, given the names of the instance
/// extensions it has. With it (and its flag) the loader also lists portability devices, those
/// that implement Vulkan only in part over another API (MoltenVK over Metal on macOS); without
/// it a loader of 1.3.216 or later hides them, and halo would find no device on a Mac.
fn offers_portability_enumeration<'a>(mut available: impl Iterator<Item = &'a CStr>) -> bool {
    available.any(|name| name == khr::portability_enumeration::NAME)
}

/// Whether a device that offers the device extensions named in `available` must have
/// `VK_KHR_portability_subset` enabled: the specification requires it wherever it is offered
/// (a portability device), so that the application acknowledges what the device leaves out.
pub(crate) fn needs_portability_subset<'a>(mut available: impl Iterator<Item = &'a CStr>) -> bool {
    available.any(|name| name == khr::portability_subset::NAME)
}

#[cfg(test)]
mod portability_tests {
    use super::*;

    #[test]
    fn portability_extensions_are_chosen_only_where_offered() {
        let loader = [c"VK_KHR_surface", c"VK_KHR_portability_enumeration"];
        assert!(offers_portability_enumeration(loader.into_iter()));
        assert!(!offers_portability_enumeration([c"VK_KHR_surface"].into_iter()));
        let moltenvk = [c"VK_KHR_portability_subset", c"VK_KHR_timeline_semaphore"];
        assert!(needs_portability_subset(moltenvk.into_iter()));
        assert!(!needs_portability_subset([c"VK_KHR_16bit_storage"].into_iter()));
    }
}
